package apitest_test

import (
	"testing"

	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestNumbersBeyondTheirBounds: a number a token holder writes past its
// documented bound (internal/bounds, docs/api.md) is a 400 naming the
// field — the runner's usage and finish (input_tokens = 2^63 − 1 once
// overflowed the budget's sum), lease waits, runner capacity, budgets,
// concurrency, approvals, log offsets. Nothing past a bound is stored.
func TestNumbersBeyondTheirBounds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "A"})
		rt := runnerToken(e, "runner-1")
		runnerID := registerRunner(e, rt, "host-1")
		queueRun(e, "ACME-1")
		l := lease(e, rt, runnerID)
		run := "/api/v1/runs/" + l.Run.ID
		const maxInt64 = int64(1<<63 - 1)
		var p struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &p)
		for _, c := range []struct {
			name, token, method, path string
			body                      any
			field                     string
		}{
			{"usage tokens", rt, "POST", run + "/usage", map[string]any{"input_tokens": maxInt64}, "input_tokens"},
			{"usage tokens just past", rt, "POST", run + "/usage", map[string]any{"output_tokens": bounds.Tokens.Max + 1}, "output_tokens"},
			{"usage cache tokens", rt, "POST", run + "/usage", map[string]any{"cache_read_tokens": -1}, "cache_read_tokens"},
			{"usage cost", rt, "POST", run + "/usage", map[string]any{"cost_usd": 1e300}, "cost_usd"},
			{"finish tokens", rt, "POST", run + "/finish", map[string]any{"exit_status": 0, "usage": map[string]any{"input_tokens": maxInt64}}, "usage.input_tokens"},
			{"finish cache write", rt, "POST", run + "/finish", map[string]any{"exit_status": 0, "usage": map[string]any{"cache_write_tokens": bounds.Tokens.Max + 1}}, "usage.cache_write_tokens"},
			{"finish cost", rt, "POST", run + "/finish", map[string]any{"exit_status": 0, "usage": map[string]any{"cost_usd": bounds.CostUSD.Max + 1}}, "usage.cost_usd"},
			{"finish exit status", rt, "POST", run + "/finish", map[string]any{"exit_status": bounds.ExitStatus.Max + 1}, "exit_status"},
			{"lease wait", rt, "POST", "/api/v1/runners/" + runnerID + "/lease", map[string]any{"wait_seconds": bounds.LeaseWait.Max + 1}, "wait_seconds"},
			{"runner capacity", rt, "POST", "/api/v1/runners", map[string]any{"name": "r2", "capacity": bounds.Capacity.Max + 1}, "capacity"},
			{"budget", apitest.BootstrapToken, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": p.Version,
				"budgets": map[string]any{"per_day_usd": bounds.BudgetUSD.Max + 1}}, "budgets.per_day_usd"},
		} {
			if r := e.Must(400, c.token, c.method, c.path, c.body); fields(t, r) != c.field {
				t.Errorf("%s: %s", c.name, r.Body)
			}
		}
		// The ends themselves are accepted, and sum without overflowing.
		var got apiRun
		top := map[string]any{"input_tokens": bounds.Tokens.Max, "output_tokens": bounds.Tokens.Max,
			"cache_read_tokens": bounds.Tokens.Max, "cache_write_tokens": bounds.Tokens.Max, "cost_usd": bounds.CostUSD.Max}
		e.Must(200, rt, "POST", run+"/usage", top).JSON(t, &got)
		if got.Usage.InputTokens != bounds.Tokens.Max {
			t.Fatalf("usage at the bound %+v", got.Usage)
		}
		e.Must(200, rt, "POST", run+"/finish", map[string]any{"exit_status": bounds.ExitStatus.Max, "usage": top})
		e.Admin(200, "GET", "/api/v1/items/ACME-1/budget", nil)
		e.Admin(200, "GET", "/api/v1/projects/ACME/budget", nil)
	})
}
