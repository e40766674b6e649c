package reconcile_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/store/storetest"
)

// TestQueriesUseIndexes keeps the pass cheap: on SQLite, no query of the
// pass scans a whole table; flows are read through flows_status, every
// other table by key.
func TestQueriesUseIndexes(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	names := make([]string, 0, len(reconcile.Queries))
	for name := range reconcile.Queries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := reconcile.Queries[name]
		rows, err := s.Query(context.Background(), "EXPLAIN QUERY PLAN "+q.SQL, q.Args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for i := range rows.Len() {
			plan = append(plan, fmt.Sprint(rows.Values[i][len(rows.Values[i])-1]))
		}
		t.Logf("%s:\n  %s", name, strings.Join(plan, "\n  "))
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "USING") && !strings.HasPrefix(step, "SCAN CONSTANT") {
				t.Errorf("%s scans a table: %s", name, step)
			}
		}
	}
}
