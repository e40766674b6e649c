package apitest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestAgentSessionCannotEndItsRunToDodgeItsSpend: the run token the agent
// session holds (for MCP) reports, asks and reads, and nothing else — its
// own run's finish, usage, heartbeat and log answer 403 — so it cannot end
// its run first with cost 0; the runner's finish, with the real usage, is
// the one that counts, and usage its runner reports later still counts.
func TestAgentSessionCannotEndItsRunToDodgeItsSpend(t *testing.T) {
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
		path := "/api/v1/runs/" + l.Run.ID
		zero := map[string]any{"exit_status": 0, "usage": map[string]any{"cost_usd": 0}}
		e.Must(403, l.RunToken, "POST", path+"/finish", zero)
		e.Must(403, l.RunToken, "POST", path+"/usage", map[string]any{"cost_usd": 0})
		e.Must(403, l.RunToken, "POST", path+"/heartbeat", nil)
		e.Must(403, l.RunToken, "POST", path+"/log?offset=0", "x")
		// What the session may do, it does.
		e.Must(200, l.RunToken, "POST", path+"/report", map[string]any{"outcome": "done", "summary": "ok"})
		// The runner's finish counts the real spend.
		var got apiRun
		e.Must(200, rt, "POST", path+"/finish", map[string]any{"exit_status": 0,
			"usage": map[string]any{"input_tokens": 9000, "output_tokens": 900, "cost_usd": 2.5}}).JSON(t, &got)
		if got.Status != "succeeded" || got.Usage != (runproto.Usage{InputTokens: 9000, OutputTokens: 900, CostUSD: 2.5}) {
			t.Fatalf("finished %+v", got)
		}
		// Late usage from the runner (a repeated finish) still counts.
		e.Must(200, rt, "POST", path+"/usage", map[string]any{"input_tokens": 9500, "output_tokens": 900, "cost_usd": 2.75}).JSON(t, &got)
		if got.Usage.CostUSD != 2.75 || got.Usage.InputTokens != 9500 {
			t.Fatalf("after late usage %+v", got.Usage)
		}
		if evs := strings.Join(runEvents(e, l.Run.ID), ","); !strings.HasSuffix(evs, "run.finished,token.revoked,run.usage_recorded") &&
			!strings.HasSuffix(evs, "run.finished,run.usage_recorded") {
			t.Fatalf("events %s", evs)
		}
	})
}

// TestRESTReportRefusedForCancelledRun: a run whose cancellation was
// requested takes no report through REST either (409 naming it), as
// through MCP: the rule is the domain's, every door gets it.
func TestRESTReportRefusedForCancelledRun(t *testing.T) {
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
		ctx := context.Background()
		r, err := e.Core.Runs.Get(ctx, l.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		part, ok := e.Core.Runs.Cancel(r, "the ticket was paused", e.Core.Clock.Now())
		if !ok {
			t.Fatal("a running run was not cancellable")
		}
		if err := e.Core.Applier.Apply(ctx, &part); err != nil {
			t.Fatal(err)
		}
		path := "/api/v1/runs/" + l.Run.ID
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", path + "/report", map[string]any{"outcome": "done", "summary": "All done"}},
			{"POST", path + "/questions", map[string]any{"text": "may I?", "blocking": false}},
			{"GET", path + "/skills", nil},
		} {
			if r := e.Must(409, l.RunToken, c.method, c.path, c.body); !strings.Contains(errOf(t, r).Error.Message, "cancelled") {
				t.Errorf("%s %s: %s", c.method, c.path, r.Body)
			}
		}
		var got apiRun
		e.Must(200, rt, "POST", path+"/finish", map[string]any{"exit_status": 0}).JSON(t, &got)
		if got.Status != "cancelled" || got.Outcome != "" {
			t.Fatalf("finished %+v", got)
		}
	})
}
