package apitest_test

import (
	"fmt"
	"strings"
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
	t.Parallel()
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

// TestQueryAndSettingsBeyondTheirBounds: the rest of the table — versions,
// cursors, page sizes, log offsets, token lifetimes, concurrency,
// approvals, stage timeouts and iterations — each just below its minimum and just above its maximum is a
// 400 naming the field, and each end itself is accepted.
func TestQueryAndSettingsBeyondTheirBounds(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "A"})
		rn := queueRun(e, "ACME-1")
		log := "/api/v1/runs/" + rn.ID + "/log"
		q := func(path, name string, n int64) string { return fmt.Sprintf("%s?%s=%d", path, name, n) }
		type row struct {
			method, path string
			body         any
			field        string
		}
		var rows []row
		// Query numbers: below and above, then the ends accepted.
		for _, c := range []struct {
			path, name string
			b          bounds.Bound
			min, max   int64 // the route's own ends, within b (0: the top is not a page, e.g. past the log's head)
		}{
			{"/api/v1/projects/ACME/items", "after", bounds.After, bounds.After.Min, bounds.After.Max},
			{"/api/v1/items/ACME-1/events", "after", bounds.After, bounds.After.Min, 0},
			{"/api/v1/projects/ACME/events", "after", bounds.After, bounds.After.Min, 0},
			{"/api/v1/projects/ACME/items", "limit", bounds.Limit, 1, 200},
			{"/api/v1/items/ACME-1/events", "limit", bounds.Limit, 1, 1000},
			{"/api/v1/tokens", "limit", bounds.Limit, 1, 1000},
			{"/api/v1/needs-me", "limit", bounds.Limit, 1, 0},
			{"/api/v1/projects/ACME/flows", "limit", bounds.Limit, 1, 0},
			{log, "offset", bounds.LogOffset, bounds.LogOffset.Min, 0},
		} {
			rows = append(rows, row{"GET", q(c.path, c.name, c.b.Min-1), nil, c.name}, row{"GET", q(c.path, c.name, c.b.Max+1), nil, c.name})
			e.Admin(200, "GET", q(c.path, c.name, c.min), nil)
			if c.max > 0 {
				e.Admin(200, "GET", q(c.path, c.name, c.max), nil)
			}
		}
		// A pipeline's version 0 is its built-in default.
		for path, min := range map[string]int64{"/api/v1/projects/ACME/skills/none": bounds.Version.Min, "/api/v1/projects/ACME/pipelines/default": 0} {
			rows = append(rows, row{"GET", q(path, "version", min-1), nil, "version"},
				row{"GET", q(path, "version", bounds.Version.Max+1), nil, "version"})
		}
		// Versions sent with a write.
		for path, field := range map[string]string{"/api/v1/items/ACME-1": "title", "/api/v1/projects/ACME": "name"} {
			rows = append(rows, row{"PATCH", path, map[string]any{"version": bounds.Version.Min - 1, field: "B"}, "version"},
				row{"PATCH", path, map[string]any{"version": bounds.Version.Max + 1, field: "B"}, "version"})
		}
		rows = append(rows,
			row{"PATCH", "/api/v1/platform", map[string]any{"version": bounds.Version.Max + 1, "concurrency_limit": 1}, "version"},
			row{"PATCH", "/api/v1/platform", map[string]any{"version": 1, "concurrency_limit": bounds.PlatformConcurrency.Max + 1}, "concurrency_limit"},
			row{"POST", "/api/v1/tokens", map[string]any{"name": "t", "organization": "acme", "expires_in": "8761h"}, "expires_in"},
			row{"POST", "/api/v1/tokens", map[string]any{"name": "t", "organization": "acme", "expires_in": "0s"}, "expires_in"},
		)
		// A pipeline's numbers (0 is "not written": the default).
		stage := func(timeout int64) map[string]any {
			return map[string]any{"id": "work", "kind": "agent", "timeout_minutes": timeout}
		}
		pipe := func(iterations, timeout int64) map[string]any {
			def := map[string]any{"stages": []any{stage(timeout)}}
			if iterations != 0 {
				def["max_iterations"] = iterations
			}
			return map[string]any{"version": 0, "definition": def}
		}
		const pipePath = "/api/v1/projects/ACME/pipelines/default"
		rows = append(rows, row{"PUT", pipePath, pipe(-1, 0), "max_iterations"}, row{"PUT", pipePath, pipe(bounds.MaxIterations.Max+1, 0), "max_iterations"},
			row{"PUT", pipePath, pipe(0, -1), "timeout_minutes"}, row{"PUT", pipePath, pipe(0, bounds.StageTimeout.Max+1), "timeout_minutes"})
		var p struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &p)
		for _, f := range []struct {
			field string
			body  map[string]any
			b     bounds.Bound
		}{
			{"concurrency_limit", nil, bounds.ProjectConcurrency},
			{"merge_policy.required_approvals", nil, bounds.RequiredApprovals},
		} {
			set := func(n int64) map[string]any {
				if f.field == "concurrency_limit" {
					return map[string]any{"version": p.Version, "concurrency_limit": n}
				}
				return map[string]any{"version": p.Version, "merge_policy": map[string]any{"required_approvals": n}}
			}
			rows = append(rows, row{"PATCH", "/api/v1/projects/ACME", set(f.b.Min - 1), f.field}, row{"PATCH", "/api/v1/projects/ACME", set(f.b.Max + 1), f.field})
		}
		for _, c := range rows {
			r := e.Do(apitest.BootstrapToken, c.method, c.path, c.body)
			if r.Status != 400 || !strings.Contains(named(t, r), c.field) {
				t.Errorf("%s %s %v: %d %s, want a 400 naming %s", c.method, c.path, c.body, r.Status, r.Body, c.field)
			}
		}
		// The ends of the write numbers are accepted.
		e.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": p.Version, "concurrency_limit": bounds.ProjectConcurrency.Max,
			"merge_policy": map[string]any{"required_approvals": bounds.RequiredApprovals.Max}})
		e.Admin(200, "PUT", pipePath, pipe(bounds.MaxIterations.Max, bounds.StageTimeout.Max))
		e.Admin(200, "PUT", pipePath, map[string]any{"version": 1, "definition": map[string]any{"max_iterations": bounds.MaxIterations.Min,
			"stages": []any{stage(bounds.StageTimeout.Min)}}})
		e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "year", "organization": "acme", "expires_in": "8760h"})
	})
}

// named is every field and pipeline path a 400's details name.
func named(t *testing.T, r *apitest.Response) string {
	t.Helper()
	var body struct {
		Error struct {
			Details []struct{ Field, Path string }
		}
	}
	r.JSON(t, &body)
	var out []string
	for _, d := range body.Error.Details {
		out = append(out, d.Field+d.Path)
	}
	return strings.Join(out, ",")
}
