package reconcile_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// Rule 1: a flow whose ticket was paused or cancelled behind its back (no
// flow.stop job) is stopped and its run cancelled; one whose stop job is
// still pending is left to that job.
func TestStopsFlowsOfPausedTickets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		leased := w.ticket("task")
		w.drain()
		w.lease(leased)
		queued, pausedByAPI := w.ticket("task"), w.ticket("task")
		w.drain()
		w.exec(`UPDATE items SET state = 'paused', version = version + 1 WHERE key = ?`, queued)
		w.exec(`UPDATE items SET state = 'cancelled', version = version + 1 WHERE key = ?`, leased)
		it := w.item(pausedByAPI)
		w.Admin(200, "PATCH", "/api/v1/items/"+pausedByAPI, map[string]any{"version": it.Version, "state": "paused"}) // queues flow.stop

		evs := w.repair(reconcile.Report{Stopped: 2})
		w.wantEvents(evs, map[string]int{"flow.stopped": 2, "run.cancelled": 1, "run.cancel_requested": 1})
		for key, want := range map[string]string{queued: run.StatusCancelled, leased: run.StatusRunning} {
			f := w.flow(key)
			if f.Status != flow.StatusStopped || f.FinishedAt == nil {
				t.Fatalf("%s: flow %s, want stopped", key, f.Status)
			}
			rn, _ := w.Core.Runs.Get(context.Background(), f.RunID)
			if rn.Status != want || (want == run.StatusRunning && !rn.CancelRequested) {
				t.Fatalf("%s: run %s (cancel requested %v), want it cancelled", key, rn.Status, rn.CancelRequested)
			}
		}
		if f := w.flow(pausedByAPI); f.Status != flow.StatusRunning {
			t.Fatalf("the flow whose stop job is pending is %s: the reconciler must leave it to the job", f.Status)
		}
		w.drain()
		if f := w.flow(pausedByAPI); f.Status != flow.StatusStopped {
			t.Fatalf("after its stop job: %s", f.Status)
		}
		if n := strings.Count(w.logs.String(), "rule=stopped"); n != 2 {
			t.Fatalf("%d stops logged, want 2: %s", n, w.logs)
		}
	})
}

// Rule 2: a run without progress (heartbeats do not count) beyond its
// stage's timeout plus slack is cancelled and its flow flagged: exactly one
// flow.stuck and one blocking question each.
func TestFlagsStalledRuns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/docs", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "write", "kind": "agent", "timeout_minutes": 30}}}})
		hung, busy, short := w.ticket("task"), w.ticket("task"), w.ticket("docs")
		w.drain()
		hungRun, busyRun := w.lease(hung), w.lease(busy)
		w.lease(short)
		queued := w.ticket("task") // no runner takes its run
		w.drain()
		queuedRun := w.flow(queued).RunID

		// 30 minutes + slack later, only the 30-minute stage is stalled.
		w.clk.Advance(30*time.Minute + slack + time.Minute)
		evs := w.repair(reconcile.Report{Stalled: 1})
		w.wantEvents(evs, map[string]int{"flow.stuck": 1, "question.asked": 1, "ticket.state_changed": 1, "run.cancel_requested": 1})
		if f := w.flow(short); f.Waiting != flow.WaitAnswer {
			t.Fatalf("the 30-minute stage was not flagged: %s/%s", f.Status, f.Waiting)
		}
		// Two hours + slack in, the hung session still heartbeats but made
		// no progress; busy reported a minute ago (a report is progress).
		w.clk.Advance(2*time.Hour - 30*time.Minute + time.Minute)
		w.exec(`UPDATE runs SET heartbeat_at = ? WHERE id = ?`, w.clk.Now().UnixMilli(), hungRun.ID)
		w.exec(`UPDATE runs SET updated_at = ? WHERE id = ?`, w.clk.Now().Add(-time.Minute).UnixMilli(), busyRun.ID)
		evs = w.repair(reconcile.Report{Stalled: 2})
		w.wantEvents(evs, map[string]int{"flow.stuck": 2, "question.asked": 2, "ticket.state_changed": 2,
			"run.cancel_requested": 1, "run.cancelled": 1})
		for _, key := range []string{hung, queued} {
			f := w.flow(key)
			if f.Status != flow.StatusWaiting || f.Waiting != flow.WaitAnswer {
				t.Fatalf("%s: flow %s/%s, want waiting for an answer", key, f.Status, f.Waiting)
			}
			if st := w.item(key).State; st != "waiting_for_answer" {
				t.Fatalf("%s is %s", key, st)
			}
			if n := w.count(`SELECT COUNT(*) FROM questions WHERE item_id = ? AND blocking = 1 AND answer IS NULL`, w.item(key).ID); n != 1 {
				t.Fatalf("%s has %d open blocking questions", key, n)
			}
		}
		if rn, _ := w.Core.Runs.Get(context.Background(), hungRun.ID); !rn.CancelRequested {
			t.Fatal("the hung run was not cancelled")
		}
		if rn, _ := w.Core.Runs.Get(context.Background(), queuedRun); rn.Status != run.StatusCancelled {
			t.Fatalf("the queued run is %s", rn.Status)
		}
		if f := w.flow(busy); f.Waiting != flow.WaitRun {
			t.Fatalf("the run with progress was flagged: %s/%s", f.Status, f.Waiting)
		}
	})
}

// Rule 3, lost: a step whose job is gone (deleted, or done while the flow
// still waits) is queued again under the same dedupe key, without an
// event, and the orchestrator woken for each (Config.WakeJobs); the flows
// then go on.
func TestRequeuesLostSteps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		var wakes atomic.Int32
		w := setup(t, s, reconcile.Config{WakeJobs: func() { wakes.Add(1) }})
		resume := w.ticket("task")
		w.waitingForAnswer(resume)
		w.answer(resume) // queues flow.resume …
		resumeKey := "flow-resume:" + w.item(resume).ID
		w.exec(`DELETE FROM jobs WHERE dedupe_key = ?`, resumeKey) // … which is lost
		finished, merge, going := w.ticket("task"), w.ticket("bug"), w.ticket("task")
		w.drain()
		w.runner.Complete(w.lease(finished), "done", "implemented") // queues flow.run_finished …
		finishedKey := "flow:" + w.flow(finished).ID + ":run_finished:1"
		w.exec(`DELETE FROM jobs WHERE dedupe_key = ?`, finishedKey) // … which is lost
		fm := w.flow(merge)
		if fm.Waiting != flow.WaitChecks {
			t.Fatalf("merge flow %s/%s", fm.Status, fm.Waiting)
		}
		mergeKey := "flow:" + fm.ID + ":merge:1"
		rows, _ := s.Query(context.Background(), `SELECT payload FROM jobs WHERE dedupe_key = ?`, mergeKey)
		var mergePayload string
		_ = rows.Scan(0, &mergePayload)
		w.exec(`UPDATE jobs SET status = 'done' WHERE dedupe_key = ?`, mergeKey) // done, but the flow still waits for checks
		enter := w.ticket("task")
		enterKey := "flow:" + w.flow(enter).ID + ":enter:1"
		w.exec(`UPDATE jobs SET status = 'done' WHERE dedupe_key = ?`, enterKey)
		// (going's run is still queued: nothing of it is lost.)

		evs := w.repair(reconcile.Report{Requeued: 4})
		w.wantEvents(evs, map[string]int{})
		for _, key := range []string{enterKey, finishedKey, mergeKey, resumeKey} {
			if st := w.jobStatus(key); st != "pending" {
				t.Fatalf("%s: %q, want pending", key, st)
			}
		}
		rows, _ = s.Query(context.Background(), `SELECT payload FROM jobs WHERE dedupe_key = ? AND status = 'pending'`, mergeKey)
		var again string
		_ = rows.Scan(0, &again)
		if again != mergePayload {
			t.Fatalf("merge job queued again with %s, want %s", again, mergePayload)
		}
		if n := strings.Count(w.logs.String(), "queued a lost step again"); n != 4 {
			t.Fatalf("%d re-queues logged, want 4", n)
		}
		if n := wakes.Load(); n != 4 {
			t.Fatalf("the orchestrator was woken %d times, want once per re-queue (4)", n)
		}
		w.drain()
		if f := w.flow(enter); f.Waiting != flow.WaitRun {
			t.Fatalf("enter after the repair: %s/%s", f.Status, f.Waiting)
		}
		if f := w.flow(finished); f.Stage != "review" {
			t.Fatalf("finished after the repair: stage %s", f.Stage)
		}
		if f := w.flow(resume); f.Waiting != flow.WaitRun || f.Step != 2 {
			t.Fatalf("resume after the repair: %s/%s step %d", f.Status, f.Waiting, f.Step)
		}
		if f := w.flow(going); f.Waiting != flow.WaitRun || f.Step != 1 {
			t.Fatalf("going: %s/%s step %d", f.Status, f.Waiting, f.Step)
		}
	})
}

// Rule 3, dead: a step whose job failed for good flags the flow: one
// flow.stuck, one blocking question, the ticket waiting for an answer (a
// ticket that waits already records no state change). The answer resumes
// the stage.
func TestFlagsDeadSteps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		resume := w.ticket("task")
		w.waitingForAnswer(resume)
		enter := w.ticket("task")
		w.answer(resume)
		w.exec(`UPDATE jobs SET status = 'dead', attempt = 23, failures = 20, last_error = 'boom' WHERE status = 'pending' AND kind IN ('flow.enter', 'flow.resume')`)

		evs := w.repair(reconcile.Report{Dead: 2})
		w.wantEvents(evs, map[string]int{"flow.stuck": 2, "question.asked": 2, "ticket.state_changed": 1})
		for _, key := range []string{enter, resume} {
			f := w.flow(key)
			if f.Status != flow.StatusWaiting || f.Waiting != flow.WaitAnswer {
				t.Fatalf("%s: flow %s/%s", key, f.Status, f.Waiting)
			}
			if st := w.item(key).State; st != "waiting_for_answer" {
				t.Fatalf("%s is %s", key, st)
			}
		}
		var stuck struct {
			Events []struct {
				Type    string
				Payload struct{ Reason string }
			}
		}
		w.Admin(200, "GET", "/api/v1/items/"+enter+"/events?limit=1000", nil).JSON(t, &stuck)
		found := false
		for _, e := range stuck.Events {
			if e.Type == "flow.stuck" {
				found = strings.HasSuffix(e.Payload.Reason, "entering stage implement failed for good: boom (20 failures in a row)")
			}
		}
		if !found {
			t.Fatalf("flow.stuck without the reason: %+v", stuck.Events)
		}
		w.answer(enter)
		w.drain()
		if f := w.flow(enter); f.Waiting != flow.WaitRun || f.Step != 2 {
			t.Fatalf("after the answer: %s/%s step %d", f.Status, f.Waiting, f.Step)
		}
	})
}

// Rule 4: runs that no flow waits for are cancelled (a queued one at once,
// a running one by request); the run its flow waits for is left alone.
func TestCancelsOrphanRuns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		key := w.ticket("task")
		w.drain()
		f := w.flow(key)
		it := w.item(key)
		now := time.Now()
		orphans := []string{transition.NewID(), transition.NewID()}
		for i, id := range orphans {
			if _, err := s.Exec(context.Background(), run.Insert(run.Run{ID: id, OrganizationID: f.OrganizationID, ProjectID: f.ProjectID,
				ItemID: it.ID, FlowID: f.ID, Stage: "implement", Iteration: 1, Step: 90 + i, Adapter: "claude-code"}, now)); err != nil {
				t.Fatal(err)
			}
		}
		w.exec(`UPDATE runs SET status = 'running', started_at = ?, heartbeat_at = ? WHERE id = ?`, now.UnixMilli(), now.UnixMilli(), orphans[1])

		evs := w.repair(reconcile.Report{Orphaned: 2})
		w.wantEvents(evs, map[string]int{"run.cancelled": 1, "run.cancel_requested": 1})
		if rn, _ := w.Core.Runs.Get(context.Background(), orphans[0]); rn.Status != run.StatusCancelled {
			t.Fatalf("queued orphan is %s", rn.Status)
		}
		if rn, _ := w.Core.Runs.Get(context.Background(), orphans[1]); !rn.CancelRequested {
			t.Fatal("running orphan not cancelled")
		}
		if rn, _ := w.Core.Runs.Get(context.Background(), f.RunID); rn.Status != run.StatusQueued || rn.CancelRequested {
			t.Fatalf("the flow's own run was touched: %s", rn.Status)
		}
	})
}

// Rule 5: a flow waiting for budget is released when BudgetOK says so
// (through Release); a flow waiting for a pause that ended is released when
// its release job was lost. Without Release the rule is skipped.
func TestReleasesWaitingFlows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		var mu sync.Mutex
		ok, asked := false, 0
		w := setup(t, s, reconcile.Config{})
		budget, pause := w.ticket("task"), w.ticket("task")
		w.exec(`UPDATE flows SET status = 'waiting', waiting = 'budget', version = version + 1 WHERE item_id = ?`, w.item(budget).ID)
		w.exec(`UPDATE flows SET status = 'waiting', waiting = 'pause', version = version + 1 WHERE item_id = ?`, w.item(pause).ID)
		w.exec(`DELETE FROM jobs`)

		w.repair(reconcile.Report{}) // no Release: rule 5 is skipped
		w.rec = w.reconciler(reconcile.Config{
			BudgetOK: func(ctx context.Context, f flow.Flow) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				asked++
				return ok, nil
			},
			Release: w.Core.Flows.Release,
		})
		evs := w.repair(reconcile.Report{Released: 1}) // the pause is over; the budget is still spent
		w.wantEvents(evs, map[string]int{"flow.resumed": 1})
		mu.Lock()
		if asked != 2 {
			t.Fatalf("BudgetOK asked %d times, want once per pass", asked)
		}
		ok = true
		mu.Unlock()
		evs = w.repair(reconcile.Report{Released: 1})
		w.wantEvents(evs, map[string]int{"flow.resumed": 1})
		for _, key := range []string{budget, pause} {
			if f := w.flow(key); f.Status != flow.StatusRunning || f.Waiting != flow.WaitNone || f.Step != 2 {
				t.Fatalf("%s: %s/%s step %d", key, f.Status, f.Waiting, f.Step)
			}
		}
	})
}

// Two reconcilers passing at once apply every repair exactly once.
func TestConcurrentPassesRepairOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		paused, dead, lost := w.ticket("task"), w.ticket("task"), w.ticket("task")
		w.drain()
		w.exec(`UPDATE items SET state = 'paused', version = version + 1 WHERE key = ?`, paused)
		w.exec(`UPDATE flows SET status = 'running', waiting = NULL, run_id = NULL, version = version + 1 WHERE item_id IN (?, ?)`,
			w.item(dead).ID, w.item(lost).ID) // their runs become orphans
		w.exec(`INSERT INTO jobs (id, kind, payload, status, run_at, attempt, max_attempts, dedupe_key, last_error, created_at, updated_at)
VALUES (?, 'flow.enter', '{}', 'dead', 0, 20, 20, ?, 'boom', 0, 0)`, transition.NewID(), "flow:"+w.flow(dead).ID+":enter:1")
		w.exec(`DELETE FROM jobs WHERE status = 'done' AND dedupe_key = ?`, "flow:"+w.flow(dead).ID+":enter:1")
		w.exec(`DELETE FROM jobs WHERE status = 'done' AND dedupe_key = ?`, "flow:"+w.flow(lost).ID+":enter:1")
		seq := w.seq()

		others := []*reconcile.Reconciler{w.rec, w.reconciler(reconcile.Config{}), w.reconciler(reconcile.Config{})}
		reps := make([]reconcile.Report, len(others))
		var wg sync.WaitGroup
		for i, r := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if reps[i], err = r.Pass(context.Background()); err != nil {
					t.Errorf("pass %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		var sum reconcile.Report
		for _, r := range reps {
			sum.Stopped += r.Stopped
			sum.Stalled += r.Stalled
			sum.Requeued += r.Requeued
			sum.Dead += r.Dead
			sum.Orphaned += r.Orphaned
			sum.Released += r.Released
		}
		if want := (reconcile.Report{Stopped: 1, Dead: 1, Requeued: 1, Orphaned: 2}); sum != want {
			t.Fatalf("three passes at once repaired %+v together, want %+v", sum, want)
		}
		w.wantEvents(w.events(seq), map[string]int{"flow.stopped": 1, "flow.stuck": 1, "question.asked": 1, "ticket.state_changed": 1,
			"run.cancelled": 3})
		if n := w.count(`SELECT COUNT(*) FROM jobs WHERE dedupe_key = ?`, "flow:"+w.flow(lost).ID+":enter:1"); n != 1 {
			t.Fatalf("%d enter jobs for the lost step", n)
		}
	})
}

// Run passes at once and then every Interval on the injected clock.
func TestRunPassesEveryInterval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		key := w.ticket("task")
		enterKey := "flow:" + w.flow(key).ID + ":enter:1"
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.rec.Run(ctx) }()
		defer func() { cancel(); apitest.Receive(t, done, "the reconciler to stop") }()

		apitest.BlockUntil(t, w.clk, 1) // the first pass ran; the loop sleeps
		if n := w.passes(); n != 1 {
			t.Fatalf("%d passes observed, want 1", n)
		}
		if w.jobStatus(enterKey) != "pending" {
			t.Fatal("the first pass touched the pending job")
		}
		w.exec(`DELETE FROM jobs WHERE dedupe_key = ?`, enterKey)
		w.clk.Advance(reconcile.DefaultInterval - time.Second)
		if w.clk.Waiters() != 1 || w.passes() != 1 {
			t.Fatal("a pass ran before the interval was up")
		}
		w.clk.Advance(time.Second)
		apitest.BlockUntil(t, w.clk, 1) // the second pass ran
		if n := w.passes(); n != 2 {
			t.Fatalf("%d passes observed, want 2", n)
		}
		if w.jobStatus(enterKey) != "pending" || w.metric(reconcile.RuleRequeued) != 1 {
			t.Fatalf("the second pass did not queue the lost step again: %q", w.jobStatus(enterKey))
		}
	})
}

// TestRequeuedStepKeepsTheConfiguredAttempts: a lost step queued again
// runs as often as [jobs] max_attempts says, like every other job, not the
// built-in default.
func TestRequeuedStepKeepsTheConfiguredAttempts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{MaxAttempts: 7})
		key := w.ticket("task")
		enterKey := "flow:" + w.flow(key).ID + ":enter:1"
		w.exec(`UPDATE jobs SET status = 'done' WHERE dedupe_key = ?`, enterKey) // lost
		w.repair(reconcile.Report{Requeued: 1})
		if n := w.count(`SELECT max_attempts FROM jobs WHERE dedupe_key = ? AND status = 'pending'`, enterKey); n != 7 {
			t.Fatalf("the step queued again may run %d times, want 7 ([jobs] max_attempts)", n)
		}
	})
}
