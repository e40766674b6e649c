package store

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- a comment\nCREATE TABLE a (\n  x INTEGER -- trailing\n);\n\nCREATE INDEX i ON a (x);\n")
	want := []string{"CREATE TABLE a (\n  x INTEGER\n);", "CREATE INDEX i ON a (x);"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Admits takes Core's own migrations (all, or the first ones of an older
// version) and refuses none, another service's and a newer version's.
func TestAdmits(t *testing.T) {
	ms, err := CoreMigrations.Migrations()
	if err != nil || len(ms) < 2 {
		t.Fatal(ms, err)
	}
	if err := CoreMigrations.Admits([]string{ms[0].Name, ms[1].Name}); err != nil {
		t.Errorf("an older version's database: %v", err)
	}
	for _, c := range []struct {
		applied []string
		want    string
	}{
		{nil, "it holds no migration"},
		{[]string{"0001_knowledge"}, "migration 0001_knowledge, which this version of Ballet does not know"},
		{[]string{ms[0].Name, "9999_future"}, "migration 9999_future"},
	} {
		if err := CoreMigrations.Admits(c.applied); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.applied, err, c.want)
		}
	}
}
