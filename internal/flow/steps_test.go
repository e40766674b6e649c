package flow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// loopPipeline is the tests' main pipeline (ticket type task): an agent
// stage with a 30-minute timeout whose failure fails the pipeline, a human
// review that sends it back, and a merge that sends it back too; at most
// two iterations.
var loopPipeline = map[string]any{"max_iterations": 2, "stages": []any{
	map[string]any{"id": "build", "kind": "agent", "timeout_minutes": 30, "instructions": "Build it.", "next": map[string]any{"failed": "$failed"}},
	map[string]any{"id": "review", "kind": "human", "next": map[string]any{"failed": "build"}},
	map[string]any{"id": "ship", "kind": "platform", "action": "merge", "next": map[string]any{"failed": "build"}},
}}

// TestEnterEachKindAndMoveOn walks one ticket through every kind of stage
// and both directions of a move, checking after each step the state the
// handler left, its events, the jobs it queued and the run: entering an
// agent stage creates its run and its timeout, a human stage waits for an
// approval, a merge stage starts checking; a forward move keeps the
// iteration, a move back starts the next one, and every move is a new step.
func TestEnterEachKindAndMoveOn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		seq := w.seq()
		key := w.ticket("task")
		f := w.wantFlow(key, "build it=1 step=1 running/")
		w.wantTicket(key, "in_progress")
		evs := w.since(seq)
		wantTypes(t, evs, "ticket.created", "flow.started", "ticket.state_changed")
		wantPayload(t, evs[1], map[string]any{"stage": "build", "iteration": 1, "step": 1, "ticket": key, "pipeline": "task", "pipeline_version": 1})
		if f.MaxIterations != 2 || f.RunID != "" || f.Pipeline != "task" {
			t.Fatalf("started flow %+v", f)
		}
		if got := jobKeys(w.pending(&f)); len(got) != 1 || got[0] != fmt.Sprintf("flow.enter flow:%s:enter:1", f.ID) {
			t.Fatalf("jobs after the start: %v", got)
		}

		// An agent stage: its run, its event, its timeout.
		seq = w.seq()
		w.mustStep(flow.JobEnter, key)
		f = w.wantFlow(key, "build it=1 step=1 running/run")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stage_started", "run.created")
		wantPayload(t, evs[0], map[string]any{"kind": "agent", "waiting": "run", "run": f.RunID, "stage": "build", "iteration": 1, "step": 1})
		r := w.run(f.RunID)
		if r.Status != run.StatusQueued || r.Stage != "build" || r.Iteration != 1 || r.Step != 1 || r.FlowID != f.ID || r.Instructions != "Build it." {
			t.Fatalf("the stage's run: %+v", r)
		}
		var first flow.Artifacts
		if err := json.Unmarshal(r.Artifacts, &first); err != nil {
			t.Fatal(err)
		}
		if first.PreviousReport != nil || first.Ticket.Key != key || first.Branch != "ballet/"+key {
			t.Fatalf("the first stage's run hands over %+v: want the ticket and no previous report", first)
		}
		jobs := w.pending(&f)
		if got := jobKeys(jobs); len(got) != 1 || got[0] != fmt.Sprintf("flow.timeout flow:%s:timeout:1", f.ID) {
			t.Fatalf("jobs after entering build: %v", got)
		}
		if want := w.clk.Now().Add(30 * time.Minute); !jobs[0].RunAt.Equal(want) {
			t.Fatalf("the timeout runs at %s, want %s (30 minutes after the entry)", jobs[0].RunAt, want)
		}
		w.replay(flow.JobEnter, map[string]any{"flow_id": f.ID, "step": 1})

		// Done: forward to the human review, same iteration, next step.
		lr := w.lease(key, "build", 1)
		w.runner.Complete(lr, "done", "built")
		seq = w.seq()
		w.mustStep(flow.JobRunFinished, key)
		f = w.wantFlow(key, "review it=1 step=2 running/")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stage_finished")
		wantPayload(t, evs[0], map[string]any{"outcome": "done", "report": "built", "next": "review", "next_iteration": 1, "stage": "build", "iteration": 1, "step": 1})
		if f.Outcome != "done" || f.Report != "built" || f.OutcomeStage != "build" || f.RunID != "" {
			t.Fatalf("after build: outcome %q report %q of %q, run %q", f.Outcome, f.Report, f.OutcomeStage, f.RunID)
		}
		if got := jobKeys(w.pending(&f)); len(got) != 1 || got[0] != fmt.Sprintf("flow.enter flow:%s:enter:2", f.ID) {
			t.Fatalf("jobs after build: %v (the run's timeout must be done)", got)
		}
		w.replay(flow.JobRunFinished, map[string]any{"flow_id": f.ID, "run_id": lr.ID, "step": 1})
		w.replay(flow.JobEnter, map[string]any{"flow_id": f.ID, "step": 1}) // a late entry of step 1 must not enter step 2

		// A human stage waits for an approval, without a run.
		seq = w.seq()
		w.mustStep(flow.JobEnter, key)
		f = w.wantFlow(key, "review it=1 step=2 waiting/approval")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stage_started")
		wantPayload(t, evs[0], map[string]any{"kind": "human", "waiting": "approval", "stage": "review", "step": 2})
		if f.RunID != "" || len(w.pending(&f)) != 0 {
			t.Fatalf("a human stage has run %q and jobs %v", f.RunID, jobKeys(w.pending(&f)))
		}

		// Rejected: back to build, the next iteration.
		seq = w.seq()
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/reject", map[string]any{"comment": "not yet"})
		f = w.wantFlow(key, "build it=2 step=3 running/")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stage_finished")
		wantPayload(t, evs[0], map[string]any{"outcome": "failed", "report": "not yet", "next": "build", "next_iteration": 2})
		if evs[0].ActorKind != "human" || evs[0].ActorSub != "bootstrap" {
			t.Fatalf("the rejection is recorded as %s %s, want the human who rejected", evs[0].ActorKind, evs[0].ActorSub)
		}
		w.Must(409, "test-bootstrap-token-0123456789", "POST", "/api/v1/items/"+key+"/flow/approve", nil)

		// The second iteration's run hands the review over.
		w.mustStep(flow.JobEnter, key)
		f = w.wantFlow(key, "build it=2 step=3 running/run")
		r = w.run(f.RunID)
		var art flow.Artifacts
		if err := json.Unmarshal(r.Artifacts, &art); err != nil {
			t.Fatal(err)
		}
		if r.Iteration != 2 || r.Step != 3 || art.PreviousReport == nil || *art.PreviousReport != (flow.ReportArtifact{Stage: "review", Outcome: "failed", Report: "not yet"}) {
			t.Fatalf("run of iteration 2: %+v, handed over %+v", r, art.PreviousReport)
		}

		// Done in iteration 2: forward, still iteration 2.
		lr = w.lease(key, "build", 2)
		w.runner.Complete(lr, "done", "built again")
		w.mustStep(flow.JobRunFinished, key)
		w.wantFlow(key, "review it=2 step=4 running/")
		w.mustStep(flow.JobEnter, key)
		seq = w.seq()
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/approve", nil)
		f = w.wantFlow(key, "ship it=2 step=5 running/")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stage_finished")
		wantPayload(t, evs[0], map[string]any{"outcome": "done", "report": "approved by bootstrap", "next": "ship", "next_iteration": 2})

		// A merge stage checks the pull request.
		seq = w.seq()
		w.mustStep(flow.JobEnter, key)
		f = w.wantFlow(key, "ship it=2 step=5 running/checks")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stage_started")
		wantPayload(t, evs[0], map[string]any{"kind": "platform", "waiting": "checks", "stage": "ship", "step": 5})
		jobs = w.pending(&f)
		if got := jobKeys(jobs); len(got) != 1 || got[0] != fmt.Sprintf("flow.merge flow:%s:merge:5", f.ID) {
			t.Fatalf("jobs after entering ship: %v", got)
		}
		if jobs[0].Payload["entered_at"] != float64(w.clk.Now().UnixMilli()) || jobs[0].Payload["step"] != float64(5) {
			t.Fatalf("merge job payload %v", jobs[0].Payload)
		}
		if f.RunID != "" {
			t.Fatalf("a merge stage has run %q", f.RunID)
		}
	})
}

// TestRunFinishedOutcomes: what a finished run means for its flow, for
// every way a run can end.
func TestRunFinishedOutcomes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		// started returns a ticket whose build run is leased.
		started := func() (string, flow.Flow, apitest.LeasedRun) {
			t.Helper()
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			return key, w.flow(key), lr
		}

		// failed → $failed: the flow fails, the ticket pauses.
		{
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			w.runner.Complete(lr, "failed", "cannot")
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			f := w.wantFlow(key, "build it=1 step=1 failed/")
			w.wantTicket(key, "paused")
			evs := w.since(seq)
			wantTypes(t, evs, "flow.failed", "ticket.state_changed")
			wantPayload(t, evs[0], map[string]any{"outcome": "failed", "report": "cannot", "reason": "stage build ended failed, which fails the pipeline"})
			if f.FinishedAt == nil || !f.FinishedAt.Equal(w.clk.Now()) || len(w.pending(&f)) != 0 {
				t.Fatalf("failed flow: finished %v, jobs %v", f.FinishedAt, jobKeys(w.pending(&f)))
			}
		}

		// blocked → $question: a blocking question, the ticket waits.
		{
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			w.runner.Complete(lr, "blocked", "which database?")
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			f := w.wantFlow(key, "build it=1 step=1 waiting/answer")
			w.wantTicket(key, "waiting_for_answer")
			evs := w.since(seq)
			wantTypes(t, evs, "flow.waiting", "question.asked", "ticket.state_changed")
			wantPayload(t, evs[0], map[string]any{"waiting": "answer", "outcome": "blocked", "reason": "stage build ended blocked", "question": evs[1].EntityID})
			qs := w.openQuestions(key)
			if len(qs) != 1 || !strings.Contains(qs[0], "stage build ended blocked") || !strings.Contains(qs[0], "which database?") {
				t.Fatalf("questions %q", qs)
			}
			if f.Outcome != "blocked" || f.RunID != "" || len(w.pending(&f)) != 0 {
				t.Fatalf("flow waiting for the answer: outcome %q run %q jobs %v", f.Outcome, f.RunID, jobKeys(w.pending(&f)))
			}
		}

		// a session that fails without a report fails the stage.
		{
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			w.runner.Finish(lr, 3)
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			w.wantFlow(key, "build it=1 step=1 failed/")
			wantPayload(t, w.since(seq)[0], map[string]any{"outcome": "failed", "report": "the session failed: the session exited with status 3"})
		}

		// a cancelled session fails the stage.
		{
			key, f, lr := started()
			w.exec(`UPDATE runs SET cancel_requested = 1 WHERE id = ?`, f.RunID)
			w.runner.Finish(lr, 143)
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			w.wantFlow(key, "build it=1 step=1 failed/")
			wantPayload(t, w.since(seq)[0], map[string]any{"outcome": "failed", "report": "the session was cancelled"})
		}

		// a blocking question of the session makes the flow wait, without an outcome.
		{
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			w.runner.Ask(lr, "left or right?", true)
			w.runner.Complete(lr, "done", "asked")
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			f := w.wantFlow(key, "build it=1 step=1 waiting/answer")
			w.wantTicket(key, "waiting_for_answer")
			evs := w.since(seq)
			wantTypes(t, evs, "flow.waiting", "ticket.state_changed")
			wantPayload(t, evs[0], map[string]any{"waiting": "answer", "reason": "the session asked a blocking question", "outcome": nil})
			if qs := w.openQuestions(key); len(qs) != 1 || qs[0] != "left or right?" {
				t.Fatalf("open questions %q: the flow must not ask one of its own", qs)
			}
			if f.Outcome != "" || len(w.pending(&f)) != 0 {
				t.Fatalf("outcome %q, jobs %v", f.Outcome, jobKeys(w.pending(&f)))
			}
		}

		// a question answered while the session ran: the stage runs again.
		{
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			w.runner.Ask(lr, "left or right?", true)
			w.answerAll(key)
			w.mustStep(flow.JobResume, key) // the flow runs: nothing to resume yet
			w.wantFlow(key, "build it=1 step=1 running/run")
			w.runner.Complete(lr, "done", "asked")
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			f := w.wantFlow(key, "build it=1 step=2 running/")
			w.wantTicket(key, "in_progress")
			evs := w.since(seq)
			wantTypes(t, evs, "flow.resumed")
			wantPayload(t, evs[0], map[string]any{"reason": "the session's blocking question was answered while it ran", "step": 1})
			if got := jobKeys(w.pending(&f)); len(got) != 1 || got[0] != fmt.Sprintf("flow.enter flow:%s:enter:2", f.ID) {
				t.Fatalf("jobs %v", got)
			}
		}

		// a session that failed over budget waits for budget.
		{
			key := w.ticket("task")
			w.mustStep(flow.JobEnter, key)
			lr := w.lease(key, "build", 1)
			w.patchProject(map[string]any{"budgets": map[string]any{"per_day_usd": 0}})
			w.runner.Finish(lr, 1)
			seq := w.seq()
			w.mustStep(flow.JobRunFinished, key)
			evs := w.since(seq)
			w.patchProject(map[string]any{"budgets": map[string]any{"per_day_usd": nil}})
			w.wantFlow(key, "build it=1 step=1 waiting/budget")
			wantTypes(t, evs, "flow.waiting")
			wantPayload(t, evs[0], map[string]any{"waiting": "budget"})
			if r, _ := evs[0].P["reason"].(string); !strings.HasPrefix(r, "the session failed while over budget: the project's daily budget is used up") {
				t.Fatalf("reason %q", r)
			}
		}

		// a finish of another run is not this step's.
		{
			key, f, _ := started()
			w.replay(flow.JobRunFinished, map[string]any{"flow_id": f.ID, "run_id": "some-other-run", "step": 1})
			w.wantFlow(key, "build it=1 step=1 running/run")
		}
	})
}

// TestIterationLimitAsks: a move back beyond max_iterations asks a
// question instead of starting the stage, and the flow waits for it.
func TestIterationLimitAsks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		key := w.ticket("task")
		for it := 1; it <= 2; it++ {
			w.mustStep(flow.JobEnter, key)
			w.runner.Complete(w.lease(key, "build", it), "done", "built")
			w.mustStep(flow.JobRunFinished, key)
			w.mustStep(flow.JobEnter, key)
			w.wantFlow(key, fmt.Sprintf("review it=%d step=%d waiting/approval", it, 2*it))
			seq := w.seq()
			w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/reject", map[string]any{"comment": "no"})
			if it == 1 {
				w.wantFlow(key, "build it=2 step=3 running/")
				continue
			}
			f := w.wantFlow(key, "review it=2 step=4 waiting/answer")
			w.wantTicket(key, "waiting_for_answer")
			evs := w.since(seq)
			wantTypes(t, evs, "flow.waiting", "question.asked", "ticket.state_changed")
			wantPayload(t, evs[0], map[string]any{"waiting": "answer", "outcome": "failed",
				"reason": "stage review ended failed and would start iteration 3 of at most 2"})
			if qs := w.openQuestions(key); len(qs) != 1 || !strings.Contains(qs[0], "would start iteration 3 of at most 2") {
				t.Fatalf("questions %q", qs)
			}
			if len(w.pending(&f)) != 0 {
				t.Fatalf("jobs %v", jobKeys(w.pending(&f)))
			}
		}
	})
}

// TestResumeAfterTheAnswer: the answer to the last blocking question
// resumes the flow in a new step of the same stage, with the answer handed
// over; a resume while a question is still open, or of a flow that does not
// wait for an answer, does nothing; a ticket paused meanwhile is stopped.
func TestResumeAfterTheAnswer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		key := w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		lr := w.lease(key, "build", 1)
		w.runner.Ask(lr, "left or right?", true)
		w.runner.Ask(lr, "red or blue?", true)
		w.runner.Complete(lr, "done", "asked twice")
		w.mustStep(flow.JobRunFinished, key)
		f := w.wantFlow(key, "build it=1 step=1 waiting/answer")

		// One of two answered: nothing happens.
		qs, _ := w.Core.Tracker.ListQuestions(t.Context(), f.ItemID)
		w.Admin(200, "POST", "/api/v1/questions/"+qs[0].ID+"/answer", map[string]any{"answer": "left"})
		if got := jobKeys(w.pending(&f)); len(got) != 0 {
			t.Fatalf("a resume was queued with a question still open: %v", got)
		}
		w.replay(flow.JobResume, map[string]any{"item_id": f.ItemID})

		// The last one: a new step of the same stage.
		w.answerAll(key)
		seq := w.seq()
		w.mustStep(flow.JobResume, key)
		f = w.wantFlow(key, "build it=1 step=2 running/")
		w.wantTicket(key, "in_progress")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.resumed", "ticket.state_changed")
		wantPayload(t, evs[0], map[string]any{"reason": "the last blocking question was answered", "step": 1, "stage": "build"})
		if got := jobKeys(w.pending(&f)); len(got) != 1 || got[0] != fmt.Sprintf("flow.enter flow:%s:enter:2", f.ID) {
			t.Fatalf("jobs after the resume: %v", got)
		}
		w.replay(flow.JobResume, map[string]any{"item_id": f.ItemID}) // running: nothing to resume
		w.mustStep(flow.JobEnter, key)
		f = w.wantFlow(key, "build it=1 step=2 running/run")
		var art flow.Artifacts
		if err := json.Unmarshal(w.run(f.RunID).Artifacts, &art); err != nil {
			t.Fatal(err)
		}
		if len(art.AnsweredQuestions) != 2 || art.AnsweredQuestions[0].Answer == "" || art.Ticket.Key != key || art.Branch != "ballet/"+key {
			t.Fatalf("artifacts of the resumed stage: %+v", art)
		}
		w.runner.Complete(w.lease(key, "build", 1), "done", "answered")

		// Paused while it waits for the answer: the resume stops it.
		key = w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		lr = w.lease(key, "build", 1)
		w.runner.Complete(lr, "blocked", "stuck")
		w.mustStep(flow.JobRunFinished, key)
		w.setTicket(key, "paused") // queues flow.stop
		w.answerAll(key)           // queues flow.resume
		seq = w.seq()
		w.mustStep(flow.JobResume, key)
		f = w.wantFlow(key, "build it=1 step=1 stopped/")
		wantTypes(t, w.since(seq), "flow.stopped")
		w.mustStep(flow.JobStop, key)
		if len(w.since(seq)) != 1 {
			t.Fatalf("the stop after the stop recorded %v", types(w.since(seq)))
		}
	})
}

// TestStopCancelsTheRun: pausing or cancelling a ticket stops its flow and
// cancels its run — a queued run at once, a running one by request; a
// step that runs when the ticket was paused behind its back stops it too,
// and a stop of a ticket that runs again does nothing.
func TestStopCancelsTheRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})

		queued := w.ticket("task")
		w.mustStep(flow.JobEnter, queued)
		runID := w.flow(queued).RunID
		w.setTicket(queued, "paused")
		seq := w.seq()
		w.mustStep(flow.JobStop, queued)
		f := w.wantFlow(queued, "build it=1 step=1 stopped/")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.stopped", "run.cancelled")
		wantPayload(t, evs[0], map[string]any{"reason": "the ticket is paused", "ticket_state": "paused", "step": 1})
		if r := w.run(runID); r.Status != run.StatusCancelled || evs[1].EntityID != runID {
			t.Fatalf("the queued run is %s", r.Status)
		}
		if f.FinishedAt == nil || !f.FinishedAt.Equal(w.clk.Now()) {
			t.Fatalf("stopped flow finished at %v", f.FinishedAt)
		}
		w.mustStep(flow.JobRunFinished, queued) // the cancelled run's finish: the flow has stopped
		w.replay(flow.JobStop, map[string]any{"item_id": f.ItemID})
		w.wantTicket(queued, "paused")

		leased := w.ticket("task")
		w.mustStep(flow.JobEnter, leased)
		w.lease(leased, "build", 1)
		runID = w.flow(leased).RunID
		w.setTicket(leased, "cancelled")
		seq = w.seq()
		w.mustStep(flow.JobStop, leased)
		w.wantFlow(leased, "build it=1 step=1 stopped/")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.stopped", "run.cancel_requested")
		wantPayload(t, evs[0], map[string]any{"ticket_state": "cancelled"})
		if r := w.run(runID); r.Status != run.StatusRunning || !r.CancelRequested {
			t.Fatalf("the running run: %s, cancel requested %v", r.Status, r.CancelRequested)
		}

		// Paused behind the flow's back (no stop job): its next step stops it.
		behind := w.ticket("task")
		w.exec(`UPDATE items SET state = 'paused', version = version + 1 WHERE key = ?`, behind)
		seq = w.seq()
		w.mustStep(flow.JobEnter, behind)
		w.wantFlow(behind, "build it=1 step=1 stopped/")
		wantTypes(t, w.since(seq), "flow.stopped")

		// A stop for a ticket that runs again changes nothing.
		again := w.ticket("task")
		w.mustStep(flow.JobEnter, again)
		w.replay(flow.JobStop, map[string]any{"item_id": w.item(again).ID})
		w.wantFlow(again, "build it=1 step=1 running/run")
	})
}

// TestTimeoutFlagsTheStage: a run still going at its stage's timeout is
// cancelled and the flow flagged (flow.stuck, a blocking question); a
// timeout after the run finished does nothing.
func TestTimeoutFlagsTheStage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": loopPipeline})
		key := w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		w.lease(key, "build", 1)
		f := w.flow(key)
		seq := w.seq()
		w.mustStep(flow.JobTimeout, key)
		w.wantFlow(key, "build it=1 step=1 waiting/answer")
		w.wantTicket(key, "waiting_for_answer")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.stuck", "question.asked", "ticket.state_changed", "run.cancel_requested")
		wantPayload(t, evs[0], map[string]any{"reason": "stage build ran longer than its timeout of 30m0s", "waiting": "answer", "step": 1})
		if qs := w.openQuestions(key); len(qs) != 1 || !strings.Contains(qs[0], key+" is stuck: stage build ran longer than its timeout of 30m0s") {
			t.Fatalf("questions %q", qs)
		}
		if r := w.run(f.RunID); !r.CancelRequested {
			t.Fatal("the timed-out run was not cancelled")
		}

		// Finished in time: its timeout is done with, and a late one is a no-op.
		key = w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		w.runner.Complete(w.lease(key, "build", 1), "done", "in time")
		f = w.flow(key)
		w.mustStep(flow.JobRunFinished, key)
		for _, j := range w.pending(&f) {
			if j.Kind == flow.JobTimeout {
				t.Fatalf("the finished run's timeout is still pending: %v", jobKeys(w.pending(&f)))
			}
		}
		w.replay(flow.JobTimeout, map[string]any{"flow_id": f.ID, "step": 1})
	})
}
