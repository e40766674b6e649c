package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// BenchmarkPassIdle measures a pass that finds nothing wrong, on SQLite,
// with 10,000 healthy active flows (every state a flow can wait in, each
// with its pending job, run or open question) and 10,000 finished flows of
// history (30,000 finished runs, 60,000 done jobs).
func BenchmarkPassIdle(b *testing.B) {
	const active, finished = 10000, 10000
	s := storetest.Open(b, "sqlite")
	e := apitest.New(b, s)
	var org struct{ ID string }
	e.Admin(201, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"}).JSON(b, &org)
	projectID := e.Project("acme", "ACME")
	var pv struct{ Definition json.RawMessage }
	e.Admin(200, "GET", "/api/v1/projects/ACME/pipelines/default", nil).JSON(b, &pv)
	populate(b, s, org.ID, projectID, string(pv.Definition), active, finished)

	rec := reconcile.New(s, clock.Real{}, nil, e.Core.Flows, e.Core.Runs, reconcile.Config{Slack: 5 * time.Minute, Release: e.Core.Flows.Release})
	ctx := context.Background()
	began := time.Now()
	rep, err := rec.Pass(ctx)
	if err != nil || rep.Total() != 0 {
		b.Fatalf("the first pass repaired %+v: %v", rep, err)
	}
	b.Logf("first pass (reads the pinned definitions of %d running stages): %s", active*3/10, time.Since(began))
	b.ResetTimer()
	for b.Loop() {
		rep, err := rec.Pass(ctx)
		if err != nil || rep.Total() != 0 {
			b.Fatalf("an idle pass repaired %+v: %v", rep, err)
		}
	}
}

// populate writes the flows directly, in large batches.
func populate(tb testing.TB, s store.Store, orgID, projectID, def string, active, finished int) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	var batch []store.Statement
	flush := func(force bool) {
		if len(batch) >= 5000 || (force && len(batch) > 0) {
			if _, err := s.Exec(ctx, batch...); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	add := func(q string, args ...any) { batch = append(batch, store.Stmt(q, args...)) }
	item := func(n int, state string) string {
		id := transition.NewID()
		add(`INSERT INTO items (id, organization_id, project_id, number, key, type, title, description, acceptance_criteria, epic_id, state,
created_by, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, 'task', 'ticket', '', '', NULL, ?, 'bench', ?, ?, 1)`,
			id, orgID, projectID, n, fmt.Sprintf("ACME-%d", n), state, now, now)
		return id
	}
	flow := func(itemID, stage string, step int, status string, waiting, runID any, at int64) string {
		id := transition.NewID()
		var fin any
		if status == "done" {
			fin = at
		}
		add(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration,
max_iterations, step, status, waiting, run_id, outcome, report, outcome_stage, pull_request, started_at, updated_at, finished_at, version)
VALUES (?, ?, ?, ?, 'default', 0, ?, ?, 1, 3, ?, ?, ?, ?, NULL, NULL, NULL, NULL, ?, ?, ?, 1)`,
			id, orgID, projectID, itemID, def, stage, step, status, waiting, runID, at, at, fin)
		return id
	}
	runRow := func(id, itemID, flowID, stage string, step int, status string, at int64) {
		var fin any
		if status != "running" {
			fin = at
		}
		add(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions,
skills, artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error, input_tokens, output_tokens,
cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, ?, 1, ?, 'claude-code', '', '', '[]', '{}', ?, 'runner', NULL, NULL, NULL, 0, NULL, NULL, 0, 0, 0, 0, ?, ?, ?, ?, ?, 2)`,
			id, orgID, projectID, itemID, flowID, stage, step, status, at, at, now, fin, at)
	}
	jobRow := func(kind, key, status string, payload any, runAt int64) {
		p, _ := json.Marshal(payload)
		add(`INSERT INTO jobs (id, kind, payload, status, run_at, attempt, max_attempts, dedupe_key, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, 0, 20, ?, ?, ?)`, transition.NewID(), kind, string(p), status, runAt, key, runAt, runAt)
	}
	question := func(itemID string, answered bool, at int64) {
		var answer, by, ansAt any
		if answered {
			answer, by, ansAt = "yes", "bench", at
		}
		add(`INSERT INTO questions (id, organization_id, project_id, item_id, text, blocking, asked_by_kind, asked_by, asked_at, answer,
answered_by, answered_at, version) VALUES (?, ?, ?, ?, 'which way?', 1, 'system', 'flow', ?, ?, ?, ?, 1)`,
			transition.NewID(), orgID, projectID, itemID, at, answer, by, ansAt)
	}
	n := 1000
	for i := range finished {
		n++
		at := now - int64(24*time.Hour/time.Millisecond) - int64(i)*1000
		itemID := item(n, "done")
		f := flow(itemID, "integrate", 4, "done", nil, nil, at)
		for step, stage := range []string{"implement", "review", "verify"} {
			runRow(transition.NewID(), itemID, f, stage, step+1, "succeeded", at)
			jobRow("flow.enter", fmt.Sprintf("flow:%s:enter:%d", f, step+1), "done", map[string]any{"flow_id": f, "step": step + 1}, at)
			jobRow("flow.run_finished", fmt.Sprintf("flow:%s:run_finished:%d", f, step+1), "done", map[string]any{"flow_id": f, "step": step + 1}, at)
		}
		flush(false)
	}
	for i := range active {
		n++
		at := now - int64(time.Hour/time.Millisecond) + int64(i)*300 // within the last hour
		switch i % 10 {
		case 0: // entering a stage
			itemID := item(n, "in_progress")
			f := flow(itemID, "implement", 1, "running", nil, nil, at)
			jobRow("flow.enter", fmt.Sprintf("flow:%s:enter:1", f), "pending", map[string]any{"flow_id": f, "step": 1}, now)
		case 1, 2, 3: // an agent session, 30 minutes into a 2-hour stage
			itemID := item(n, "in_progress")
			runID := transition.NewID()
			f := flow(itemID, "implement", 1, "running", "run", runID, at)
			runRow(runID, itemID, f, "implement", 1, "running", now-int64(30*time.Minute/time.Millisecond))
			jobRow("flow.enter", fmt.Sprintf("flow:%s:enter:1", f), "done", map[string]any{"flow_id": f, "step": 1}, at)
			jobRow("flow.timeout", fmt.Sprintf("flow:%s:timeout:1", f), "pending", map[string]any{"flow_id": f, "step": 1}, at+int64(2*time.Hour/time.Millisecond))
		case 4, 5: // a merge stage: checks, then a review
			itemID := item(n, "in_progress")
			status, waiting := "running", "checks"
			if i%10 == 5 {
				status, waiting = "waiting", "review"
			}
			f := flow(itemID, "integrate", 4, status, waiting, nil, at)
			jobRow("flow.merge", fmt.Sprintf("flow:%s:merge:4", f), "pending", map[string]any{"flow_id": f, "step": 4, "entered_at": at}, now+5000)
		case 6, 7: // a human approval
			f := flow(item(n, "in_progress"), "review", 2, "waiting", "approval", nil, at)
			_ = f
		case 8, 9: // a blocking question (an earlier one answered)
			itemID := item(n, "waiting_for_answer")
			flow(itemID, "implement", 2, "waiting", "answer", nil, at)
			question(itemID, true, at-1000)
			question(itemID, false, at)
		}
		flush(false)
	}
	flush(true) // no ANALYZE: Core never runs it, so the plans are those without statistics
}
