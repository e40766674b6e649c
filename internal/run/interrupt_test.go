package run_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// A runner that registers again naming the sessions it runs ends at once,
// in the registration's batch, every other run Core holds as running on
// it: interrupted, reason runner_restart, its token revoked and the flow's
// reaction queued. The runs it still runs, and queued runs, are left.
func TestRegisterAgainInterruptsLostSessions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		w.newRun()
		lost, _ := w.lease()
		kept, _ := w.lease()
		queued := w.newRun()
		var rn run.Runner
		evs := w.expect("register again", "", []string{"runner.registered", "run.finished", "token.revoked"}, func() (err error) {
			rn, err = w.svc.RegisterRunner(w.ctx, w.runnerP, run.RunnerInput{Name: "host-1", Sessions: []string{kept.Run.ID}})
			return err
		})
		if rn.ID != w.runner.ID {
			t.Fatalf("registered again as %s, was %s", rn.ID, w.runner.ID)
		}
		if evs[1].EntityID != lost.Run.ID {
			t.Fatalf("run.finished of %s, want the lost run %s", evs[1].EntityID, lost.Run.ID)
		}
		p, ok, err := event.Decode[run.RunFinished](evs[1])
		if !ok || err != nil || p.Status != run.StatusInterrupted || p.Reason != run.ReasonRunnerRestart {
			t.Fatalf("run.finished payload %+v %v", p, err)
		}
		r := w.get(lost.Run.ID)
		if r.Status != run.StatusInterrupted || r.Reason != run.ReasonRunnerRestart || r.FinishedAt == nil || r.ExitStatus != nil {
			t.Fatalf("the lost run %+v", r)
		}
		if _, err := w.authn.Authenticate(w.ctx, "Bearer "+lost.RunToken); codeOf(err) != apperr.Unauthenticated {
			t.Fatalf("the lost run's token: %v", err)
		}
		if r := w.get(kept.Run.ID); r.Status != run.StatusRunning {
			t.Fatalf("the run still running there: %+v", r)
		}
		if r := w.get(queued.ID); r.Status != run.StatusQueued {
			t.Fatalf("the queued run: %+v", r)
		}
		w.wantFinishedJobs(r)

		// An older runner that names no sessions leaves its runs to the
		// grace period.
		w.expect("register without sessions", "", []string{"runner.registered"}, func() error {
			_, err := w.svc.RegisterRunner(w.ctx, w.runnerP, run.RunnerInput{Name: "host-1"})
			return err
		})
		if r := w.get(kept.Run.ID); r.Status != run.StatusRunning {
			t.Fatalf("registered without sessions: %+v", r)
		}
		// A late finish of the interrupted run only counts its usage.
		w.expect("late finish", "", []string{"run.usage_recorded"}, func() error {
			_, err := w.svc.Finish(w.ctx, w.runnerP.Actor, lost.Run.ID, run.FinishInput{ExitStatus: ptr(143),
				Usage: &runproto.Usage{InputTokens: 10}})
			return err
		})
		if r := w.get(lost.Run.ID); r.Status != run.StatusInterrupted || r.Reason != run.ReasonRunnerRestart {
			t.Fatalf("after a late finish: %+v", r)
		}
	})
}

// The runner's word that a session ended because of its infrastructure
// ends the run interrupted, unless the agent reported and exited well.
func TestFinishInterrupted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		l, _ := w.lease()
		w.expect("an unknown reason", apperr.Invalid, nil, func() error {
			_, err := w.svc.Finish(w.ctx, w.runnerP.Actor, l.Run.ID, run.FinishInput{ExitStatus: ptr(143), Interrupted: "runner_lost"})
			return err
		})
		var got run.Run
		w.expect("drained", "", []string{"run.finished", "token.revoked"}, func() (err error) {
			got, err = w.svc.Finish(w.ctx, w.runnerP.Actor, l.Run.ID, run.FinishInput{ExitStatus: ptr(143),
				Error: "the runner was stopped and its drain time (1m0s) ran out", Interrupted: run.ReasonRunnerDrain})
			return err
		})
		if r := w.get(l.Run.ID); got.Status != run.StatusInterrupted || r.Status != run.StatusInterrupted || r.Reason != run.ReasonRunnerDrain ||
			r.Error != "the runner was stopped and its drain time (1m0s) ran out" {
			t.Fatalf("finished %+v, stored %+v", got, r)
		}
		w.wantFinishedJobs(w.get(l.Run.ID))
	})
}

// The kill switch interrupts a running run: its cancellation is requested
// with the interruption, and its finish ends it interrupted (kill_switch);
// a queued run is cancelled.
func TestInterruptKillSwitch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		l, _ := w.lease()
		queued := w.newRun()
		now := w.fc.Now()
		for _, r := range []run.Run{w.get(l.Run.ID), queued} {
			part, ok := w.svc.Interrupt(r, run.ReasonKillSwitch, "kill switch", now)
			if !ok {
				t.Fatalf("nothing to interrupt of %+v", r)
			}
			if err := w.applier.Apply(w.ctx, &part); err != nil {
				t.Fatal(err)
			}
		}
		if r := w.get(queued.ID); r.Status != run.StatusCancelled || r.Reason != "" {
			t.Fatalf("the queued run %+v", r)
		}
		running := w.get(l.Run.ID)
		if _, ok := w.svc.Interrupt(running, run.ReasonKillSwitch, "kill switch", now); ok || !running.CancelRequested {
			t.Fatalf("interrupted twice: %+v", running)
		}
		w.fc.Advance(time.Second)
		got, err := w.svc.Finish(w.ctx, w.runnerP.Actor, l.Run.ID, run.FinishInput{ExitStatus: ptr(143), Error: "cancelled: …"})
		if err != nil || got.Status != run.StatusInterrupted || got.Reason != run.ReasonKillSwitch || got.Error != "kill switch" {
			t.Fatalf("finish %+v %v", got, err)
		}
	})
}

// Gone is the runs held that the runner no longer runs.
func TestGone(t *testing.T) {
	held := []run.Run{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	for _, c := range []struct {
		sessions []string
		want     []string
	}{{nil, []string{"a", "b", "c"}}, {[]string{"b"}, []string{"a", "c"}}, {[]string{"a", "b", "c", "d"}, nil}} {
		var got []string
		for _, r := range run.Gone(held, c.sessions) {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Gone(%v) = %v, want %v", c.sessions, got, c.want)
		}
	}
}
