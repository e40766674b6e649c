package apitest_test

import (
	"context"
	"math"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestHugeStoredSpendBreaksNoFlow: runs whose stored usage is the largest
// int64 (rows beyond the API's bounds, written around it) sum without an
// overflow — their project's budget reads answer, saturated, never a 500
// — and another project's flows enter their agent stages within budget.
// On the old code SUM overflowed: the reads answered 500.
func TestHugeStoredSpendBreaksNoFlow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.Project("acme", "BAD")
		ctx := context.Background()
		for _, title := range []string{"a", "b"} {
			var it struct{ Key string }
			w.Admin(201, "POST", "/api/v1/projects/BAD/items", map[string]any{"type": "task", "title": title}).JSON(t, &it)
			r := queueRun(w.Env, it.Key)
			now := w.Core.Clock.Now().UnixMilli()
			if _, err := w.Store.Exec(ctx, store.Stmt(`UPDATE runs SET status = 'failed', input_tokens = ?, output_tokens = ?,
cache_read_tokens = ?, cache_write_tokens = ?, cost_micros = ?, finished_at = ? WHERE id = ?`,
				int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), now, r.ID)); err != nil {
				t.Fatal(err)
			}
		}
		var bad struct{ Version int64 }
		w.Admin(200, "GET", "/api/v1/projects/BAD", nil).JSON(t, &bad)
		w.Admin(200, "PATCH", "/api/v1/projects/BAD", map[string]any{"version": bad.Version, "budgets": map[string]any{"per_ticket_usd": 10, "per_day_usd": 10}})
		var pb struct {
			Today struct {
				SpentUSD     float64 `json:"spent_usd"`
				RemainingUSD float64 `json:"remaining_usd"`
				InputTokens  int64   `json:"input_tokens"`
				Runs         int64
			}
		}
		w.Admin(200, "GET", "/api/v1/projects/BAD/budget", nil).JSON(t, &pb)
		if pb.Today.InputTokens != math.MaxInt64 || pb.Today.Runs != 2 || pb.Today.RemainingUSD != 0 {
			t.Fatalf("the saturated day %+v", pb.Today)
		}
		w.Admin(200, "GET", "/api/v1/items/BAD-1/budget", nil)

		// Another project, with budgets, goes on.
		w.patchProject(map[string]any{"budgets": map[string]any{"per_ticket_usd": 1, "per_day_usd": 1}})
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		w.runner.Complete(w.leaseStage(key, "implement", 1), "done", "ok")
		w.leaseStage(key, "review", 1)
	})
}
