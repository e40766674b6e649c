package apitest_test

import (
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

func (w *flowWorld) patchProject(body map[string]any) {
	w.T.Helper()
	var p struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(w.T, &p)
	body["version"] = p.Version
	w.Admin(200, "PATCH", "/api/v1/projects/ACME", body)
}

// TestProjectPauseAndKillSwitch: while the project is paused a flow waits
// before entering its next stage; resuming releases it. The platform kill
// switch cancels running stages at once; after the resume they run again.
func TestProjectPauseAndKillSwitch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		r := w.leaseStage(key, "implement", 1)
		w.patchProject(map[string]any{"paused": true})
		w.runner.Complete(r, "done", "ok")
		f := w.await(key, "pause", func(f flowView) bool { return f.Waiting == "pause" })
		if f.Status != "waiting" || f.Stage != "review" {
			t.Fatalf("paused flow %+v", f)
		}
		if _, ok := w.runner.Lease(0); ok {
			t.Fatal("a stage started while the project was paused")
		}
		w.patchProject(map[string]any{"paused": false})
		r = w.leaseStage(key, "review", 1) // released without a human touching the flow

		// The kill switch cancels the running stage at once …
		w.Admin(200, "POST", "/api/v1/platform/pause", nil)
		f = w.await(key, "kill switch", func(f flowView) bool { return f.Waiting == "pause" })
		var hb struct{ Cancelled bool }
		w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/heartbeat", nil).JSON(t, &hb)
		if !hb.Cancelled {
			t.Fatal("the kill switch did not cancel the running stage")
		}
		w.runner.Finish(r, 143)
		// … and the stage runs again after the resume.
		w.Admin(200, "POST", "/api/v1/platform/resume", nil)
		r2 := w.leaseStage(key, "review", 1)
		if r2.ID == r.ID {
			t.Fatal("the cancelled run was handed out again")
		}
		w.runner.Complete(r2, "done", "ok")
		w.await(key, "verify", func(f flowView) bool { return f.Stage == "verify" })

		var list struct{ Flows []flowView }
		w.Admin(200, "GET", "/api/v1/projects/ACME/flows?status=running", nil).JSON(t, &list)
		if len(list.Flows) != 1 || list.Flows[0].Ticket != key {
			t.Fatalf("flows listing %+v", list)
		}
		w.Admin(200, "GET", "/api/v1/projects/ACME/flows?waiting=approval", nil).JSON(t, &list)
		if len(list.Flows) != 0 {
			t.Fatalf("waiting=approval listed %+v", list)
		}
		w.Admin(400, "GET", "/api/v1/projects/ACME/flows?status=sleeping", nil)
	})
}

// TestBudgets: an agent stage starts only within budget. A used-up daily
// budget makes the flow wait (waiting: budget) until budget is back; a
// used-up ticket budget raises a blocking question. Spend is visible.
func TestBudgets(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.patchProject(map[string]any{"budgets": map[string]any{"per_ticket_usd": nil, "per_day_usd": 0.015}})
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		w.runner.Complete(w.leaseStage(key, "implement", 1), "done", "ok") // $0.01 spent
		w.runner.Complete(w.leaseStage(key, "review", 1), "done", "ok")    // $0.02 spent: over the day's $0.015
		f := w.await(key, "budget", func(f flowView) bool { return f.Waiting == "budget" })
		if f.Status != "waiting" || f.Stage != "verify" {
			t.Fatalf("over budget: %+v", f)
		}
		var pb struct {
			PerTicketUSD *float64 `json:"per_ticket_usd"`
			Today        struct {
				LimitUSD     *float64 `json:"limit_usd"`
				SpentUSD     float64  `json:"spent_usd"`
				RemainingUSD *float64 `json:"remaining_usd"`
			}
		}
		w.Admin(200, "GET", "/api/v1/projects/ACME/budget", nil).JSON(t, &pb)
		if pb.Today.SpentUSD != 0.02 || *pb.Today.LimitUSD != 0.015 || *pb.Today.RemainingUSD != 0 || pb.PerTicketUSD != nil {
			t.Fatalf("project budget %+v", pb)
		}
		// Raising the budget releases the flow.
		w.patchProject(map[string]any{"budgets": map[string]any{"per_ticket_usd": 0.025, "per_day_usd": 1}})
		r := w.leaseStage(key, "verify", 1)
		w.repo.PushBranch("ballet/" + key)
		w.runner.Complete(r, "done", "ok") // $0.03 on the ticket: over its $0.025
		var ib struct {
			SpentUSD     float64  `json:"spent_usd"`
			RemainingUSD *float64 `json:"remaining_usd"`
			InputTokens  int64    `json:"input_tokens"`
			OutputTokens int64    `json:"output_tokens"`
			Runs         int64
		}
		w.Admin(200, "GET", "/api/v1/items/"+key+"/budget", nil).JSON(t, &ib)
		if ib.SpentUSD != 0.03 || *ib.RemainingUSD != 0 || ib.InputTokens != 3000 || ib.OutputTokens != 600 || ib.Runs != 3 {
			t.Fatalf("ticket budget %+v", ib)
		}
		// The merge stage is no agent stage: it goes on over budget.
		w.await(key, "merge", func(f flowView) bool { return f.Waiting == "merge" })
		w.repo.MergeBranch("ballet/"+key, false)
		w.await(key, "done", func(f flowView) bool { return f.Status == "done" })

		k2 := w.ticket("task")
		w.patchProject(map[string]any{"budgets": map[string]any{"per_ticket_usd": 0.005, "per_day_usd": nil}})
		w.Admin(200, "POST", "/api/v1/items/"+k2+"/flow/start", nil)
		w.runner.Complete(w.leaseStage(k2, "implement", 1), "done", "ok") // $0.01 on k2: over $0.005
		f = w.await(k2, "a question", func(f flowView) bool { return f.Waiting == "answer" })
		if f.Stage != "review" || w.itemState(k2) != "waiting_for_answer" {
			t.Fatalf("ticket budget used up: %+v", f)
		}
	})
}
