package run_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestDrainRunner: a drained runner leases no new run — neither at once nor
// at the end of a long poll that began before the drain — while the run it
// holds goes on (its heartbeat still answers); its own heartbeat and a new
// registration do not lift the drain; undraining gives it the queued run.
// Each change writes its one event; a repeat writes none.
func TestDrainRunner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		held, _ := w.lease()

		var rn run.Runner
		evs := w.expect("drain", "", []string{"runner.drained"}, func() (err error) {
			rn, err = w.svc.DrainRunner(w.ctx, admin, w.runner.ID)
			return err
		})
		if !rn.Drained || rn.DrainedAt == nil || !rn.DrainedAt.Equal(w.fc.Now()) || rn.DrainedBy != admin.Sub || len(rn.Sessions) != 1 {
			t.Fatalf("drained runner %+v", rn)
		}
		p, ok, err := event.Decode[run.RunnerDrained](evs[0])
		if !ok || err != nil || p.Name != "host-1" || p.Sessions != 1 || evs[0].EntityID != w.runner.ID || evs[0].ActorSub != admin.Sub {
			t.Fatalf("runner.drained %+v payload %+v (%v)", evs[0], p, err)
		}
		w.expect("drain again", "", nil, func() error { _, err := w.svc.DrainRunner(w.ctx, admin, w.runner.ID); return err })

		queued := w.newRun()
		w.expect("lease while drained", "", nil, func() error {
			_, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil)
			if ok {
				t.Fatal("a drained runner leased a run")
			}
			return err
		})
		if _, err := w.svc.Held(w.ctx, w.runnerP, held.Run.ID); err != nil {
			t.Fatalf("the run the drained runner holds: %v", err)
		}
		if _, err := w.svc.Heartbeat(w.ctx, w.get(held.Run.ID)); err != nil {
			t.Fatalf("the held run's heartbeat: %v", err)
		}
		// The runner's own word and a re-registration leave the drain.
		if _, err := w.svc.RunnerHeartbeat(w.ctx, w.runnerP, w.runner.ID, run.HeartbeatInput{Sessions: []string{held.Run.ID}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.RegisterRunner(w.ctx, w.runnerP, run.RunnerInput{Name: "host-1"}); err != nil {
			t.Fatal(err)
		}
		list, err := w.svc.ListRunners(w.ctx, nil)
		if err != nil || len(list) != 1 || !list[0].Drained || list[0].DrainedBy != admin.Sub {
			t.Fatalf("runners after heartbeat and registration: %+v (%v)", list, err)
		}
		orgView, err := w.svc.ListRunners(w.ctx, []string{w.item.OrganizationID})
		if err != nil || !orgView[0].Drained || orgView[0].DrainedBy != "" {
			t.Fatalf("an organization admin's view: %+v (%v), want drained without who", orgView, err)
		}

		var back run.Runner
		w.expect("undrain", "", []string{"runner.undrained"}, func() (err error) {
			back, err = w.svc.UndrainRunner(w.ctx, admin, w.runner.ID)
			return err
		})
		if back.Drained || back.DrainedAt != nil || back.DrainedBy != "" {
			t.Fatalf("undrained runner %+v", back)
		}
		w.expect("undrain again", "", nil, func() error { _, err := w.svc.UndrainRunner(w.ctx, admin, w.runner.ID); return err })
		if l, _ := w.lease(); l.Run.ID != queued.ID {
			t.Fatalf("leased %s after the undrain, want %s", l.Run.ID, queued.ID)
		}

		if _, err := w.svc.DrainRunner(w.ctx, admin, "no-such-runner"); codeOf(err) != apperr.NotFound {
			t.Fatalf("draining a missing runner: %v, want not_found", err)
		}
	})
}

// TestDrainDuringLongPoll: a runner drained while its lease long poll
// waits gets no run when one comes; the run stays queued.
func TestDrainDuringLongPoll(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		type result struct {
			ok  bool
			err error
		}
		ch := make(chan result, 1)
		go func() {
			_, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 30*time.Second, nil)
			ch <- result{ok, err}
		}()
		blockUntil(t, w.fc, 1)
		if _, err := w.svc.DrainRunner(w.ctx, admin, w.runner.ID); err != nil {
			t.Fatal(err)
		}
		r := w.newRunNoTick()
		w.svc.Notify()
		blockUntil(t, w.fc, 1) // woken, found nothing it may take, waiting again
		w.fc.Advance(30 * time.Second)
		if res := receive(t, ch, "the drained runner's long poll"); res.ok || res.err != nil {
			t.Fatalf("drained runner's long poll: %+v", res)
		}
		if got := w.get(r.ID); got.Status != run.StatusQueued || got.RunnerID != "" {
			t.Fatalf("run %+v after a drained runner's long poll, want queued", got)
		}
	})
}

// TestLeaseGuardLosesToADrain: the lease batch carries the guard that its
// runner is not drained, so a drain that commits between the lease's read
// and its batch aborts the batch (a lost race: the lease re-reads and
// takes nothing) on both engines.
func TestLeaseGuardLosesToADrain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		write := func() error {
			e := event.Of(admin, "", "", w.runner.ID, run.RunnerUndrained{Name: "guard probe"})
			return w.applier.Apply(context.Background(), &transition.Transition{Events: []event.Event{e},
				Guarded: []store.Statement{run.UndrainedGuard(w.runner.ID)}})
		}
		if err := write(); err != nil {
			t.Fatalf("the guard on an undrained runner: %v", err)
		}
		if _, err := w.svc.DrainRunner(w.ctx, admin, w.runner.ID); err != nil {
			t.Fatal(err)
		}
		if err := write(); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("the guard on a drained runner: %v, want a lost race", err)
		}
	})
}
