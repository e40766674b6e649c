package storetest_test

import (
	"fmt"
	"testing"

	"github.com/ballet/ballet/internal/testkit/storetest"
)

// failures records what a check reports instead of failing the test.
type failures struct {
	testing.TB
	errors []string
}

func (f *failures) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// TestNoTableScan: a query that reads a whole table is reported; one that
// reads by index, a constant row or json_each over its argument is not.
func TestNoTableScan(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	for _, c := range []struct {
		sql   string
		args  []any
		scans bool
	}{
		{`SELECT id FROM jobs WHERE payload = ?`, []any{"{}"}, true},
		{`SELECT id FROM jobs WHERE dedupe_key = ? AND status IN ('pending', 'running')`, []any{"k"}, false},
		{`SELECT 1`, nil, false},
		{`SELECT k.value FROM json_each(?) k`, []any{`["a"]`}, false},
	} {
		f := &failures{TB: t}
		storetest.NoTableScan(f, s, "q", c.sql, c.args...)
		if got := len(f.errors) > 0; got != c.scans {
			t.Errorf("%s: reported %v, want a scan reported: %v", c.sql, f.errors, c.scans)
		}
	}
}
