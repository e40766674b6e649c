package run_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// fieldOf returns the field of err's first problem ("" when it is not a
// validation error).
func fieldOf(err error) string {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.Invalid || len(ae.FieldErrors()) == 0 {
		return ""
	}
	return ae.FieldErrors()[0].Field
}

func ptrInt(n int) *int { return &n }

// TestRegisterV2: a registration carries capacity, adapters, the runner's
// version and its problem, and answers them with sessions and alive. A
// runner that names no adapters may run both (protocol version 1). The
// same token registering the same name again updates that runner (event
// runner.registered, again); another token's runner of that name is
// another runner. Bad input names its field.
func TestRegisterV2(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		rn := w.runner
		if rn.Capacity != 1 || len(rn.Adapters) != 2 || rn.Adapters[0] != (runproto.Adapter{Name: "claude-code"}) ||
			rn.Adapters[1] != (runproto.Adapter{Name: "opencode"}) || !rn.Alive || rn.Sessions == nil || len(rn.Sessions) != 0 {
			t.Fatalf("a registration without the new fields: %+v", rn)
		}
		w.newRun()
		l, _ := w.lease()
		w.fc.Advance(time.Second)
		in := run.RunnerInput{Name: "host-1", Capacity: ptrInt(4), Adapters: []runproto.Adapter{{Name: "opencode", Version: "1.18.33"}},
			Version: "ballet 0.9.0", Problem: "bwrap is not installed"}
		var again run.Runner
		evs := w.expect("register again", "", []string{"runner.registered"}, func() (err error) {
			again, err = w.svc.RegisterRunner(w.ctx, w.runnerP, in)
			return err
		})
		if again.ID != rn.ID || again.Capacity != 4 || !slices.Equal(again.Adapters, in.Adapters) || again.Version != in.Version ||
			again.Problem != in.Problem || !slices.Equal(again.Sessions, []string{l.Run.ID}) || !again.Alive ||
			!again.LastSeenAt.Equal(w.fc.Now()) || !again.CreatedAt.Equal(rn.CreatedAt) {
			t.Fatalf("registered again: %+v (first %+v)", again, rn)
		}
		if pl := payloadOf(t, evs[0]); pl["again"] != true || pl["capacity"] != 4.0 || pl["problem"] != in.Problem {
			t.Fatalf("runner.registered again: %v", pl)
		}
		other, err := w.svc.RegisterRunner(w.ctx, w.runnerToken("runner-2"), run.RunnerInput{Name: "host-1"})
		if err != nil || other.ID == rn.ID {
			t.Fatalf("another token's host-1: %+v %v", other, err)
		}
		nine := make([]runproto.Adapter, 9)
		for _, c := range []struct {
			in    run.RunnerInput
			field string
		}{
			{run.RunnerInput{Name: "h", Capacity: ptrInt(0)}, "capacity"},
			{run.RunnerInput{Name: "h", Capacity: ptrInt(65)}, "capacity"},
			{run.RunnerInput{Name: "h", Adapters: nine}, "adapters"},
			{run.RunnerInput{Name: "h", Adapters: []runproto.Adapter{{Name: "codex"}}}, "adapters[0].name"},
			{run.RunnerInput{Name: "h", Adapters: []runproto.Adapter{{Name: "opencode"}, {Name: "opencode"}}}, "adapters[1].name"},
			{run.RunnerInput{Name: "h", Adapters: []runproto.Adapter{{Name: "opencode", Version: strings.Repeat("v", 101)}}}, "adapters[0].version"},
			{run.RunnerInput{Name: "h", Version: strings.Repeat("v", 101)}, "version"},
			{run.RunnerInput{Name: "h", Problem: strings.Repeat("p", 1001)}, "problem"},
			{run.RunnerInput{Name: "h", Problem: "bad\x1bescape"}, "problem"},
		} {
			w.expect(c.field, apperr.Invalid, nil, func() error {
				_, err := w.svc.RegisterRunner(w.ctx, w.runnerP, c.in)
				if f := fieldOf(err); f != c.field {
					t.Errorf("%+v: %v names %q, want %q", c.in, err, f, c.field)
				}
				return err
			})
		}
	})
}

// TestRunnerHeartbeatV2: the runner's heartbeat names its sessions; the
// answer names those to stop — cancellation requested, not this runner's,
// unknown, or ended by Core without the runner — and the runner with the
// runs it holds. Draining and a problem are tracked changes (runner.updated,
// only when they change) and stop the leases; liveness follows [runs] grace.
func TestRunnerHeartbeatV2(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		mine, _ := w.lease()
		w.newRun()
		theirs, err := w.svc.RegisterRunner(w.ctx, w.runnerToken("runner-2"), run.RunnerInput{Name: "host-2"})
		if err != nil {
			t.Fatal(err)
		}
		other, ok, err := w.svc.Lease(w.ctx, w.runnerToken("runner-2"), theirs.ID, 0, nil)
		if err == nil && ok {
			t.Fatalf("another token leased with a runner it did not register: %+v", other)
		}
		queued := w.newRun()
		beat := func(name string, in run.HeartbeatInput, wantEvents []string) run.RunnerBeat {
			t.Helper()
			var b run.RunnerBeat
			w.expect(name, "", wantEvents, func() (err error) {
				b, err = w.svc.RunnerHeartbeat(w.ctx, w.runnerP, w.runner.ID, in)
				return err
			})
			return b
		}
		b := beat("sessions", run.HeartbeatInput{Sessions: []string{mine.Run.ID, queued.ID, "no-such-run"}}, nil)
		if !slices.Equal(b.Cancel, []string{queued.ID, "no-such-run"}) || !slices.Contains(b.Sessions, mine.Run.ID) || !b.Alive {
			t.Fatalf("heartbeat answer %+v", b)
		}
		// A cancellation requested: the next heartbeat names it.
		r := w.get(mine.Run.ID)
		part, _ := w.svc.Cancel(r, "the ticket was paused", w.fc.Now())
		if err := w.applier.Apply(w.ctx, &part); err != nil {
			t.Fatal(err)
		}
		if b := beat("after cancel", run.HeartbeatInput{Sessions: []string{mine.Run.ID}}, nil); !slices.Equal(b.Cancel, []string{mine.Run.ID}) {
			t.Fatalf("after the cancellation: %+v", b)
		}
		// Draining: an event once, and no lease while it lasts.
		beat("draining", run.HeartbeatInput{Draining: true}, []string{"runner.updated"})
		beat("draining again", run.HeartbeatInput{Draining: true}, nil)
		if _, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil); ok || err != nil {
			t.Fatalf("a draining runner leased: %v %v", ok, err)
		}
		beat("a problem", run.HeartbeatInput{Problem: "bwrap is gone"}, []string{"runner.updated"})
		if _, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil); ok || err != nil {
			t.Fatalf("a runner with a problem leased: %v %v", ok, err)
		}
		beat("well again", run.HeartbeatInput{}, []string{"runner.updated"})
		w.lease()
		// Bad input names its field.
		for _, c := range []struct {
			in    run.HeartbeatInput
			field string
		}{
			{run.HeartbeatInput{Sessions: make([]string, 65)}, "sessions"},
			{run.HeartbeatInput{Sessions: []string{""}}, "sessions[0]"},
			{run.HeartbeatInput{Problem: strings.Repeat("p", 1001)}, "problem"},
		} {
			w.expect(c.field, apperr.Invalid, nil, func() error {
				_, err := w.svc.RunnerHeartbeat(w.ctx, w.runnerP, w.runner.ID, c.in)
				if f := fieldOf(err); f != c.field {
					t.Errorf("%+v: %v names %q, want %q", c.in, err, f, c.field)
				}
				return err
			})
		}
		// Liveness: a heartbeat within the grace period.
		w.fc.Advance(grace)
		list, err := w.svc.ListRunners(w.ctx, nil)
		if err != nil || len(list) != 2 || !list[0].Alive {
			t.Fatalf("runners just within the grace: %+v %v", list, err)
		}
		w.fc.Advance(time.Millisecond)
		if list, err = w.svc.ListRunners(w.ctx, nil); err != nil || list[0].Alive || list[1].Alive {
			t.Fatalf("runners past the grace: %+v %v", list, err)
		}
		// A run Core failed without its runner (silent past the grace):
		// its session must stop.
		if _, err := w.svc.SweepSilent(w.ctx); err != nil {
			t.Fatal(err)
		}
		if b := beat("after the sweep", run.HeartbeatInput{Sessions: []string{mine.Run.ID}}, nil); !slices.Equal(b.Cancel, []string{mine.Run.ID}) {
			t.Fatalf("after the sweep: %+v", b)
		}
	})
}

// TestLeaseAdapters: a lease gets only runs whose adapter it asks for
// (default: those its runner registered); asking for one it did not
// register, or an unknown one, is a 400 naming adapters[i].
func TestLeaseAdapters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		rp := w.runnerToken("runner-oc")
		rn, err := w.svc.RegisterRunner(w.ctx, rp, run.RunnerInput{Name: "oc", Adapters: []runproto.Adapter{{Name: "opencode", Version: "1.18.33"}}})
		if err != nil {
			t.Fatal(err)
		}
		cc := w.newRunOf("claude-code")
		if _, ok, err := w.svc.Lease(w.ctx, rp, rn.ID, 0, nil); ok || err != nil {
			t.Fatalf("an opencode runner leased a claude-code run: %v %v", ok, err)
		}
		oc := w.newRunOf("opencode")
		l, ok, err := w.svc.Lease(w.ctx, rp, rn.ID, 0, nil)
		if err != nil || !ok || l.Run.ID != oc.ID {
			t.Fatalf("the opencode runner leased %+v %v %v, want %s", l.Run, ok, err, oc.ID)
		}
		// The runner of both adapters asks for opencode only: the older
		// claude-code run stays queued.
		oc2 := w.newRunOf("opencode")
		if l, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, []string{"opencode"}); err != nil || !ok || l.Run.ID != oc2.ID {
			t.Fatalf("lease of opencode: %+v %v %v, want %s", l.Run, ok, err, oc2.ID)
		}
		if l, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil); err != nil || !ok || l.Run.ID != cc.ID {
			t.Fatalf("lease of any: %+v %v %v, want %s", l.Run, ok, err, cc.ID)
		}
		for _, c := range [][]string{{"claude-code"}, {"opencode", "codex"}} {
			w.expect(fmt.Sprint(c), apperr.Invalid, nil, func() error {
				_, _, err := w.svc.Lease(w.ctx, rp, rn.ID, 0, c)
				if f := fieldOf(err); f != fmt.Sprintf("adapters[%d]", len(c)-1) {
					t.Errorf("lease %v: %v names %q", c, err, f)
				}
				return err
			})
		}
	})
}

type sessionFunc func(ctx context.Context, r run.Run) (runproto.Session, error)

func (f sessionFunc) Session(ctx context.Context, r run.Run) (runproto.Session, error) {
	return f(ctx, r)
}

// TestLeaseUnrunnable: a run whose session cannot be prepared (a
// credential missing) is failed by the lease that meets it, with the
// reason and the flow's job, and the lease goes on to the next run; any
// other error of the session source leases nothing and changes nothing.
func TestLeaseUnrunnable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		bad := w.newRun()
		good := w.newRun()
		broken := false
		w.svc = run.NewService(st, w.applier, w.fc, w.tr, run.Config{Grace: grace, OnFinish: flow.OnRunFinished,
			Sessions: sessionFunc(func(_ context.Context, r run.Run) (runproto.Session, error) {
				switch {
				case broken:
					return runproto.Session{}, errors.New("the store is down")
				case r.ID == bad.ID:
					return runproto.Session{}, fmt.Errorf("%w: ACME_TOKEN is not set in Core's environment", run.ErrUnrunnable)
				}
				return runproto.Session{Ticket: runproto.SessionTicket{Key: "ACME-1"}}, nil
			})})
		l, _ := func() (run.Leased, bool) {
			var l run.Leased
			w.expect("lease", "", []string{"run.finished", "run.started", "token.created"}, func() error {
				var ok bool
				var err error
				l, ok, err = w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil)
				if err == nil && !ok {
					err = errors.New("nothing leased")
				}
				return err
			})
			return l, true
		}()
		if l.Run.ID != good.ID || l.Session.Ticket.Key != "ACME-1" {
			t.Fatalf("leased %+v", l)
		}
		failed := w.get(bad.ID)
		if failed.Status != run.StatusFailed || failed.Error != "cannot prepare the session: ACME_TOKEN is not set in Core's environment" ||
			failed.FinishedAt == nil || failed.RunnerID != "" {
			t.Fatalf("the unrunnable run: %+v", failed)
		}
		w.wantFinishedJobs(failed)
		broken = true
		third := w.newRun()
		w.expect("lease while the source fails", apperr.Internal, nil, func() error {
			_, _, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil)
			return err
		})
		if r := w.get(third.ID); r.Status != run.StatusQueued {
			t.Fatalf("a failing source changed the run: %+v", r)
		}
	})
}
