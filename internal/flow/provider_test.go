package flow_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// otherPipeline is loopPipeline's first stage on opencode: another
// provider credential than claude-code's.
var otherPipeline = map[string]any{"stages": []any{
	map[string]any{"id": "build", "kind": "agent", "adapter": "opencode", "timeout_minutes": 30, "instructions": "Build it.",
		"next": map[string]any{"failed": "$failed"}},
}}

// limited finishes leased run r as its runner does when the provider
// refused the session: interrupted provider_limit, with the provider's
// reset time when it gave one.
func (w *world) limited(r apitest.LeasedRun, retryAt *time.Time) {
	w.t.Helper()
	exit := 1
	status, b := w.Call(w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/finish", runproto.FinishIn{ExitStatus: &exit,
		Error: "429 rate_limit_error", Interrupted: runproto.ReasonProviderLimit, RetryAt: retryAt})
	if status != 200 {
		w.t.Fatalf("finish %s with a provider limit: %d %s", r.ID, status, b)
	}
}

// flowView reads GET /items/{key}/flow.
func (w *world) flowView(key string) map[string]any {
	w.t.Helper()
	var v map[string]any
	w.Admin(200, "GET", "/api/v1/items/"+key+"/flow", nil).JSON(w.t, &v)
	return v
}

// providerJob returns key's pending flow.provider_wait job, failing
// unless there is exactly one.
func (w *world) providerJob(key string) pendingJob {
	w.t.Helper()
	f := w.flow(key)
	var found []pendingJob
	for _, j := range w.pending(&f) {
		if j.Kind == flow.JobProviderWait {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		w.t.Fatalf("%s: %d pending %s jobs: %v", key, len(found), flow.JobProviderWait, jobKeys(w.pending(&f)))
	}
	return found[0]
}

// The provider tests run all of Core on the fake clock: a lease skips the
// runs of a limited credential until the limit's time on Core's clock.

// TestProviderLimitIsWaitedOut: a run interrupted by a provider limit with
// a reset time makes its flow wait for the provider until then (event, view,
// job at that time); the run keeps retry_at; a second ticket on the same
// credential does not start into the limit, one on another credential
// does; past the time both waiting flows run their stage again, in
// iteration 1, with no question.
func TestProviderLimitIsWaitedOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorldOn(t, s, map[string]map[string]any{"task": loopPipeline, "bug": otherPipeline}, true)
		key, queued := w.ticket("task"), w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		w.mustStep(flow.JobEnter, queued) // its run waits for a runner
		r := w.lease(key, "build", 1)
		reset := w.clk.Now().Add(5 * time.Minute).Truncate(time.Millisecond)
		w.limited(r, &reset)

		var rv map[string]any
		w.Admin(200, "GET", "/api/v1/runs/"+r.ID, nil).JSON(t, &rv)
		if rv["status"] != "interrupted" || rv["reason"] != "provider_limit" || rv["retry_at"] != reset.Format(time.RFC3339Nano) {
			t.Fatalf("the limited run reads %v %v %v, want interrupted provider_limit %s", rv["status"], rv["reason"], rv["retry_at"], reset.Format(time.RFC3339Nano))
		}
		finished := w.since(0)
		last := finished[len(finished)-1]
		for _, e := range finished {
			if e.Type == "run.finished" {
				last = e
			}
		}
		wantPayload(t, last, map[string]any{"status": "interrupted", "reason": "provider_limit", "retry_at": reset.Format(time.RFC3339Nano)})

		seq := w.seq()
		w.mustStep(flow.JobRunFinished, key)
		f := w.wantFlow(key, "build it=1 step=1 waiting/provider")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.waiting")
		wantPayload(t, evs[0], map[string]any{"waiting": "provider", "until": reset.Format(time.RFC3339Nano), "step": 1})
		if f.WaitUntil == nil || !f.WaitUntil.Equal(reset) {
			t.Fatalf("flow waits until %v, want %s", f.WaitUntil, reset)
		}
		if v := w.flowView(key); v["waiting"] != "provider" || v["until"] != reset.Format(time.RFC3339Nano) {
			t.Fatalf("flow view waiting %v until %v", v["waiting"], v["until"])
		}
		if j := w.providerJob(key); !j.RunAt.Equal(reset) {
			t.Fatalf("the provider wait runs at %s, want %s", j.RunAt, reset)
		}

		// The queued run of the same credential is not leased into the
		// limit; the hold makes its flow wait for the provider too.
		if l, ok := w.runner.Lease(0); ok {
			t.Fatalf("leased %s %s into the limit", l.Item, l.Stage)
		}
		held := w.flow(queued).RunID
		seq = w.seq()
		w.mustStep(flow.JobProviderHold, "")
		w.wantFlow(queued, "build it=1 step=1 waiting/provider")
		wantTypes(t, w.since(seq), "flow.waiting", "run.cancelled")
		if got := w.run(held).Status; got != run.StatusCancelled {
			t.Fatalf("the held run is %s, want cancelled", got)
		}
		if v := w.flowView(queued); v["until"] != reset.Format(time.RFC3339Nano) {
			t.Fatalf("the held ticket waits until %v, want %s", v["until"], reset.Format(time.RFC3339Nano))
		}

		// A second ticket on claude-code waits too, without a run; one on
		// opencode is not held.
		second, other := w.ticket("task"), w.ticket("bug")
		w.mustStep(flow.JobEnter, second)
		w.wantFlow(second, "build it=1 step=1 waiting/provider")
		if v := w.flowView(second); v["until"] != reset.Format(time.RFC3339Nano) {
			t.Fatalf("the second ticket waits until %v, want %s", v["until"], reset.Format(time.RFC3339Nano))
		}
		if n := w.count(`SELECT COUNT(*) FROM runs WHERE flow_id = ?`, w.flow(second).ID); n != 0 {
			t.Fatalf("the second ticket started %d runs into the limit", n)
		}
		w.mustStep(flow.JobEnter, other)
		w.wantFlow(other, "build it=1 step=1 running/run")
		w.lease(other, "build", 1)

		// Early, the wait snoozes and changes nothing.
		w.clk.Advance(4 * time.Minute)
		if err := w.step(flow.JobProviderWait, key); err == nil {
			t.Fatal("the provider wait ran a minute early without snoozing")
		}
		w.wantFlow(key, "build it=1 step=1 waiting/provider")

		w.clk.Advance(time.Minute)
		seq = w.seq()
		w.mustStep(flow.JobProviderWait, key)
		w.wantFlow(key, "build it=1 step=2 running/")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.resumed")
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "build it=1 step=2 running/run")
		again := w.lease(key, "build", 1)

		for _, k := range []string{queued, second} {
			w.mustStep(flow.JobProviderWait, k)
			w.mustStep(flow.JobEnter, k)
			w.wantFlow(k, "build it=1 step=2 running/run")
			w.lease(k, "build", 1)
		}

		w.runner.Complete(again, "done", "built")
		w.mustStep(flow.JobRunFinished, key)
		w.wantFlow(key, "review it=1 step=3 running/")
		for _, k := range []string{key, queued, second} {
			if qs := w.openQuestions(k); len(qs) != 0 {
				t.Fatalf("%s asked %v", k, qs)
			}
		}
	})
}

// TestProviderWaitDoubles: without a reset time a limit waits [runs]
// provider_wait (60 s), doubled per limit in a row on the credential; the
// limits are no interruptions (more than max_interruptions of them ask
// nothing); a run that succeeds ends the streak.
func TestProviderWaitDoubles(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorldOn(t, s, map[string]map[string]any{"task": loopPipeline}, true)
		key := w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute} {
			r := w.lease(key, "build", 1)
			w.limited(r, nil)
			now := w.clk.Now()
			w.mustStep(flow.JobRunFinished, key)
			f := w.wantFlow(key, fmt.Sprintf("build it=1 step=%d waiting/provider", i+1))
			if f.WaitUntil == nil || !f.WaitUntil.Equal(now.Add(want)) {
				t.Fatalf("limit %d: waits until %v, want %s later", i+1, f.WaitUntil, want)
			}
			w.clk.Advance(want)
			w.mustStep(flow.JobProviderWait, key)
			w.mustStep(flow.JobEnter, key)
			w.wantFlow(key, fmt.Sprintf("build it=1 step=%d running/run", i+2))
		}
		if qs := w.openQuestions(key); len(qs) != 0 {
			t.Fatalf("five provider limits asked %v", qs)
		}
		r := w.lease(key, "build", 1)
		w.runner.Complete(r, "done", "built")
		w.mustStep(flow.JobRunFinished, key)
		w.wantFlow(key, "review it=1 step=7 running/")
		if n := w.count(`SELECT streak FROM provider_limits WHERE credential = 'claude-code'`); n != 0 {
			t.Fatalf("a run that succeeded left a streak of %d", n)
		}

		// The next limit waits 60 s again.
		next := w.ticket("task")
		w.mustStep(flow.JobEnter, next)
		w.limited(w.lease(next, "build", 1), nil)
		now := w.clk.Now()
		w.mustStep(flow.JobRunFinished, next)
		if f := w.flow(next); f.WaitUntil == nil || !f.WaitUntil.Equal(now.Add(time.Minute)) {
			t.Fatalf("after a success a limit waits until %v, want 1m later", f.WaitUntil)
		}
	})
}

// A limit with a reset time takes it; without one the wait doubles up to
// 30 minutes; a run created before the recorded limit met the same limit:
// not one more in a row, and it never shortens the wait.
func TestDecideLimit(t *testing.T) {
	now := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		streak int
		want   time.Duration
	}{{1, time.Minute}, {2, 2 * time.Minute}, {5, 16 * time.Minute}, {6, 30 * time.Minute}, {40, 30 * time.Minute}} {
		if got := flow.ProviderBackoff(time.Minute, c.streak); got != c.want {
			t.Errorf("backoff after %d limits: %s, want %s", c.streak, got, c.want)
		}
	}
	none := flow.Limit{Credential: "claude-code"}
	reset := now.Add(90 * time.Second)
	l := flow.DecideLimit(none, run.Run{ID: "r1", CreatedAt: now.Add(-time.Minute), RetryAt: &reset}, now, time.Minute)
	if !l.Until.Equal(reset) || l.Streak != 1 || l.RunID != "r1" || !l.Found {
		t.Fatalf("first limit with a reset time: %+v", l)
	}
	past := now.Add(-time.Hour)
	if l := flow.DecideLimit(none, run.Run{ID: "r1", RetryAt: &past}, now, time.Minute); !l.Until.Equal(now) {
		t.Fatalf("a reset time in the past waits until %s, want now", l.Until)
	}
	// r2 was queued before r1's limit was recorded: the same limit, which
	// its shorter wait (61 s) does not shorten.
	same := flow.DecideLimit(l, run.Run{ID: "r2", CreatedAt: now.Add(-30 * time.Second)}, now.Add(time.Second), time.Minute)
	if same.Streak != 1 || !same.Until.Equal(reset) {
		t.Fatalf("the same limit met again: %+v", same)
	}
	// r3 was created after it: one more in a row.
	more := flow.DecideLimit(l, run.Run{ID: "r3", CreatedAt: now.Add(2 * time.Minute)}, now.Add(3*time.Minute), time.Minute)
	if more.Streak != 2 || !more.Until.Equal(now.Add(5*time.Minute)) {
		t.Fatalf("a limit in a row: %+v", more)
	}
}

// The provider wait's job names its flow and step.
func TestProviderWaitArgs(t *testing.T) {
	a := flow.ProviderWaitArgs{FlowID: "f1", Step: 3}
	b, _ := json.Marshal(a)
	if a.Kind() != "flow.provider_wait" || a.DedupeKey() != "flow:f1:provider_wait:3" || string(b) != `{"flow_id":"f1","step":3}` {
		t.Fatalf("%s %s %s", a.Kind(), a.DedupeKey(), b)
	}
}
