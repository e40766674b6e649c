package store

import (
	"reflect"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- a comment\nCREATE TABLE a (\n  x INTEGER -- trailing\n);\n\nCREATE INDEX i ON a (x);\n")
	want := []string{"CREATE TABLE a (\n  x INTEGER\n);", "CREATE INDEX i ON a (x);"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
