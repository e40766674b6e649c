package reconcile_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestQueriesUseIndexes keeps the pass cheap: on SQLite, no query of the
// pass scans a whole table; flows are read through flows_status, every
// other table by key.
func TestQueriesUseIndexes(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	for _, name := range slices.Sorted(maps.Keys(reconcile.Queries)) {
		storetest.NoTableScan(t, s, name, reconcile.Queries[name].SQL, reconcile.Queries[name].Args...)
	}
}
