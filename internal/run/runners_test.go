package run_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestRunnerLivenessIsReadNotStored: whether a runner is alive is worked
// out from its last heartbeat each time it is read — the same row reads
// alive, then silent once [runs] grace has passed on the clock, with no
// write in between, and alive again after a heartbeat.
func TestRunnerLivenessIsReadNotStored(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		alive := func(when string, want bool) {
			t.Helper()
			list, err := w.svc.ListRunners(w.ctx, nil)
			if err != nil || len(list) != 1 {
				t.Fatalf("%s: %v %v", when, list, err)
			}
			rn, err := w.svc.FindRunner(w.ctx, w.runnerP, w.runner.ID)
			if err != nil {
				t.Fatal(err)
			}
			if list[0].Alive != want || rn.Alive != want {
				t.Fatalf("%s: alive %v (listed) %v (found), want %v", when, list[0].Alive, rn.Alive, want)
			}
		}
		alive("registered", true)
		seq := w.lastSeq()
		w.fc.Advance(grace + time.Millisecond)
		alive("silent for longer than the grace", false)
		if w.lastSeq() != seq {
			t.Fatal("reading runners wrote events")
		}
		if _, err := w.svc.RunnerHeartbeat(w.ctx, w.runnerP, w.runner.ID, run.HeartbeatInput{}); err != nil {
			t.Fatal(err)
		}
		alive("after a heartbeat", true)
	})
}

// TestRemoveGoneRunners: the runners last seen before the cutoff that run
// nothing are removed, each with runner.removed (actor: the system); one
// that beat since, or holds a running run, stays. The removed runner's
// heartbeat is not found, and it registers again as a new runner.
func TestRemoveGoneRunners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		const retention = 24 * time.Hour
		goneP, freshP := w.runnerToken("runner-2"), w.runnerToken("runner-3")
		gone, err := w.svc.RegisterRunner(w.ctx, goneP, run.RunnerInput{Name: "host-2"})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := w.svc.RegisterRunner(w.ctx, freshP, run.RunnerInput{Name: "host-3"})
		if err != nil {
			t.Fatal(err)
		}
		w.newRun()
		w.lease() // host-1 runs a run
		w.fc.Advance(retention + time.Millisecond)
		if _, err := w.svc.RunnerHeartbeat(w.ctx, freshP, fresh.ID, run.HeartbeatInput{}); err != nil {
			t.Fatal(err)
		}

		seq := w.lastSeq()
		removed, err := w.svc.RemoveGoneRunners(w.ctx, w.fc.Now().Add(-retention), retention)
		if err != nil || !slices.Equal(removed, []string{"host-2"}) {
			t.Fatalf("removed %v (%v), want host-2", removed, err)
		}
		evs, err := event.List(w.ctx, w.st, event.Filter{AfterSeq: seq})
		if err != nil || len(evs) != 1 {
			t.Fatalf("events %v (%v), want one runner.removed", evs, err)
		}
		p, ok, err := event.Decode[run.RunnerRemoved](evs[0])
		if !ok || err != nil || evs[0].EntityID != gone.ID || evs[0].ActorKind != event.ActorSystem || p.Name != "host-2" ||
			!p.LastSeenAt.Equal(gone.LastSeenAt) || p.Retention != retention.String() {
			t.Fatalf("event %+v payload %+v (%v)", evs[0], p, err)
		}
		list, err := w.svc.ListRunners(w.ctx, nil)
		if err != nil || len(list) != 2 {
			t.Fatalf("runners %v (%v), want host-1 and host-3", list, err)
		}
		if again, err := w.svc.RemoveGoneRunners(w.ctx, w.fc.Now().Add(-retention), retention); err != nil || len(again) != 0 {
			t.Fatalf("a second pass removed %v (%v)", again, err)
		}

		if _, err := w.svc.RunnerHeartbeat(w.ctx, goneP, gone.ID, run.HeartbeatInput{}); codeOf(err) != "not_found" {
			t.Fatalf("the removed runner's heartbeat: %v, want not_found", err)
		}
		back, err := w.svc.RegisterRunner(w.ctx, goneP, run.RunnerInput{Name: "host-2"})
		if err != nil || back.ID == gone.ID || !back.Alive {
			t.Fatalf("registering again: %+v (%v), want a new live runner", back, err)
		}
	})
}
