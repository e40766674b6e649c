package flow_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestPauseHoldsTheNextStage: a flow of a paused project waits before it
// enters its next stage (no run); a release while it is still paused does
// nothing; the resume releases it into a new step of the same stage.
func TestPauseHoldsTheNextStage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		key := w.ticket("task")
		w.patchProject(map[string]any{"paused": true})
		for _, j := range w.pending(nil) {
			if j.Kind == flow.JobRelease {
				t.Fatalf("pausing the project queued a release: %v", jobKeys(w.pending(nil)))
			}
		}
		seq := w.seq()
		w.mustStep(flow.JobEnter, key)
		f := w.wantFlow(key, "build it=1 step=1 waiting/pause")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.waiting")
		wantPayload(t, evs[0], map[string]any{"waiting": "pause", "reason": "project ACME is paused", "step": 1})
		if f.RunID != "" || w.count(`SELECT COUNT(*) FROM runs WHERE flow_id = ?`, f.ID) != 0 || len(w.pending(&f)) != 0 {
			t.Fatalf("a paused flow has run %q, jobs %v", f.RunID, jobKeys(w.pending(&f)))
		}
		w.replay(flow.JobRelease, map[string]any{"project_id": f.ProjectID})
		if ok, err := w.Core.Flows.Release(t.Context(), f.ID); ok || err != nil {
			t.Fatalf("released while paused: %v %v", ok, err)
		}

		w.patchProject(map[string]any{"paused": false}) // queues flow.release
		seq = w.seq()
		w.mustStep(flow.JobRelease, "")
		f = w.wantFlow(key, "build it=1 step=2 running/")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.resumed")
		wantPayload(t, evs[0], map[string]any{"reason": "no longer waiting for pause", "step": 1})
		if got := jobKeys(w.pending(&f)); len(got) != 1 || got[0] != fmt.Sprintf("flow.enter flow:%s:enter:2", f.ID) {
			t.Fatalf("jobs after the release: %v", got)
		}
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "build it=1 step=2 running/run")

		// A flow whose ticket was paused meanwhile is stopped, not released.
		held := w.ticket("task")
		w.patchProject(map[string]any{"paused": true})
		w.mustStep(flow.JobEnter, held)
		w.exec(`UPDATE items SET state = 'paused', version = version + 1 WHERE key = ?`, held)
		w.patchProject(map[string]any{"paused": false})
		seq = w.seq()
		w.mustStep(flow.JobRelease, "")
		w.wantFlow(held, "build it=1 step=1 stopped/")
		wantTypes(t, w.since(seq), "flow.stopped")
	})
}

// TestBudgetsGateAgentStages: a spent ticket budget asks a question at the
// entry of an agent stage; a spent daily budget makes it wait, and only
// budget that comes back releases it. Human stages need no budget.
func TestBudgetsGateAgentStages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		w.patchProject(map[string]any{"budgets": map[string]any{"per_ticket_usd": 0}})
		key := w.ticket("task")
		seq := w.seq()
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "build it=1 step=1 waiting/answer")
		w.wantTicket(key, "waiting_for_answer")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.waiting", "question.asked", "ticket.state_changed")
		if r, _ := evs[0].P["reason"].(string); !strings.HasPrefix(r, "the ticket budget is used up") {
			t.Fatalf("reason %q", r)
		}
		if qs := w.openQuestions(key); len(qs) != 1 || !strings.Contains(qs[0], "Raise the project's ticket budget, then answer to run stage build") {
			t.Fatalf("questions %q", qs)
		}

		w.patchProject(map[string]any{"budgets": map[string]any{"per_ticket_usd": nil, "per_day_usd": 0}})
		w.mustStep(flow.JobRelease, "") // the budget change: nothing waits for budget yet
		key = w.ticket("task")
		seq = w.seq()
		w.mustStep(flow.JobEnter, key)
		f := w.wantFlow(key, "build it=1 step=1 waiting/budget")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.waiting")
		wantPayload(t, evs[0], map[string]any{"waiting": "budget"})
		if ok, err := w.Core.Flows.Release(t.Context(), f.ID); ok || err != nil {
			t.Fatalf("released without budget: %v %v", ok, err)
		}
		w.wantFlow(key, "build it=1 step=1 waiting/budget")

		w.patchProject(map[string]any{"budgets": map[string]any{"per_day_usd": 1}})
		seq = w.seq()
		w.mustStep(flow.JobRelease, "")
		w.wantFlow(key, "build it=1 step=2 running/")
		wantTypes(t, w.since(seq), "flow.resumed")
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "build it=1 step=2 running/run")
	})
}

// TestKillSwitch: pulling it cancels every running agent stage, whose flow
// waits for the pause to end, and leaves other flows alone; the resume
// runs the stage again in a new step. A kill job that runs after the
// resume does nothing.
func TestKillSwitch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		human := w.ticket("task")
		w.mustStep(flow.JobEnter, human)
		w.runner.Complete(w.lease(human, "build", 1), "done", "built")
		w.mustStep(flow.JobRunFinished, human)
		w.mustStep(flow.JobEnter, human)
		w.wantFlow(human, "review it=1 step=2 waiting/approval")
		agent := w.ticket("task")
		w.mustStep(flow.JobEnter, agent)
		runID := w.flow(agent).RunID

		w.Admin(200, "POST", "/api/v1/platform/pause", nil)
		seq := w.seq()
		w.mustStep(flow.JobKill, "")
		w.wantFlow(agent, "build it=1 step=1 waiting/pause")
		w.wantFlow(human, "review it=1 step=2 waiting/approval")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.waiting", "run.cancelled")
		wantPayload(t, evs[0], map[string]any{"waiting": "pause", "reason": "the kill switch cancelled the running stage; it runs again after the resume"})
		if r := w.run(runID); r.Status != run.StatusCancelled {
			t.Fatalf("the killed stage's run is %s", r.Status)
		}
		w.mustStep(flow.JobRunFinished, agent) // the cancelled run's finish: nothing to do
		w.wantFlow(agent, "build it=1 step=1 waiting/pause")

		w.Admin(200, "POST", "/api/v1/platform/resume", nil)
		seq = w.seq()
		w.mustStep(flow.JobRelease, "")
		w.wantFlow(agent, "build it=1 step=2 running/")
		wantTypes(t, w.since(seq), "flow.resumed")
		w.mustStep(flow.JobEnter, agent)
		w.wantFlow(agent, "build it=1 step=2 running/run")

		// Pulled and pushed back before the kill job ran: nothing is killed.
		w.Admin(200, "POST", "/api/v1/platform/pause", nil)
		w.Admin(200, "POST", "/api/v1/platform/resume", nil)
		seq = w.seq()
		w.mustStep(flow.JobKill, "")
		w.wantFlow(agent, "build it=1 step=2 running/run")
		wantTypes(t, w.since(seq))
	})
}
