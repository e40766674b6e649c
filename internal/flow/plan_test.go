package flow_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store/storetest"
)

// TestAttentionQueryUsesIndexes keeps reading attention cheap (the
// reconciler and every scrape of /metrics run it): on SQLite it scans no
// table, reading flows through flows_status and runs by key.
func TestAttentionQueryUsesIndexes(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	rows, err := s.Query(context.Background(), "EXPLAIN QUERY PLAN "+flow.AttentionQuery, int64(0), int64(0))
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for i := range rows.Len() {
		plan = append(plan, fmt.Sprint(rows.Values[i][len(rows.Values[i])-1]))
	}
	t.Logf("plan:\n  %s", strings.Join(plan, "\n  "))
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "USING") {
			t.Errorf("the attention query scans a table: %s", step)
		}
	}
}
