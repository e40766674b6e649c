package flow_test

import (
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestAttentionQueryUsesIndexes keeps reading attention cheap (the
// reconciler and every scrape of /metrics run it): on SQLite it scans no
// table, reading flows through flows_status and runs by key.
func TestAttentionQueryUsesIndexes(t *testing.T) {
	storetest.NoTableScan(t, storetest.Open(t, "sqlite"), "the attention query", flow.AttentionQuery, int64(0), int64(0))
}
