package leader_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/leader"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

const (
	ttl   = 15 * time.Second
	renew = 5 * time.Second
)

// breakable lets a test cut an instance off from the database, as a crash
// or a partition would.
type breakable struct {
	store.Store
	broken atomic.Bool
}

var errCut = errors.New("cut off")

func (b *breakable) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	if b.broken.Load() {
		return nil, errCut
	}
	return b.Store.Exec(ctx, batch...)
}

func (b *breakable) Query(ctx context.Context, q string, args ...any) (*store.Rows, error) {
	if b.broken.Load() {
		return nil, errCut
	}
	return b.Store.Query(ctx, q, args...)
}

type instance struct {
	e       *leader.Elector
	db      *breakable
	cancel  context.CancelFunc
	done    chan struct{}
	leading atomic.Int32 // lead functions running now
	terms   atomic.Int32
}

// start starts an elector; onLost, if given, is its loss hook.
func start(t *testing.T, s store.Store, fc *clock.Fake, id string, onLost ...func()) *instance {
	in := &instance{db: &breakable{Store: s}, done: make(chan struct{})}
	var lost func()
	if len(onLost) > 0 {
		lost = onLost[0]
	}
	in.e = leader.New(in.db, fc, slog.New(slog.NewTextHandler(io.Discard, nil)), "core", id, ttl, renew, lost)
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() {
		defer close(in.done)
		in.e.Run(ctx, func(ctx context.Context) {
			in.leading.Add(1)
			in.terms.Add(1)
			<-ctx.Done()
			in.leading.Add(-1)
		})
	}()
	t.Cleanup(func() { cancel(); hang.Recv(t, in.done, "elector "+id+" stopped") })
	return in
}

// step advances the fake clock by d once n electors sleep, and waits until
// they all sleep again: a timer that fired is gone from the clock until its
// elector has acted and sleeps anew, so every elector has had its turn.
func step(t *testing.T, fc *clock.Fake, n int, d time.Duration) {
	t.Helper()
	hang.BlockUntil(t, fc, n, "the electors sleeping")
	fc.Advance(d)
	hang.BlockUntil(t, fc, n, "the electors sleeping after the step")
}

// TestOneLeaderAndTakeoverOnceTheLeaseRanOut: while a renews, b never
// leads. Once a is cut off, it steps down at least half a renewal before
// its lease runs out, and b takes over once the lease has run out, at its
// next campaign (within a renewal interval of the fake clock).
func TestOneLeaderAndTakeoverOnceTheLeaseRanOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		a := start(t, s, fc, "a")
		hang.WaitFor(t, "a leads", func() bool { return a.e.Leading() && a.leading.Load() == 1 })
		b := start(t, s, fc, "b")
		// Several renewals: a keeps the lease, b never leads.
		for range 6 {
			step(t, fc, 2, time.Second)
			if b.e.Leading() || b.leading.Load() != 0 {
				t.Fatal("two leaders")
			}
		}
		if !a.e.Leading() {
			t.Fatal("a lost the lease while renewing")
		}
		// a is cut off: it steps down before its lease can have run out,
		// and b takes over once it has.
		end := leaseEnd(t, s)
		a.db.broken.Store(true)
		var takeover time.Time
		for range 40 {
			step(t, fc, 2, time.Second)
			hang.WaitFor(t, "a settles", func() bool { return a.e.Leading() == (a.leading.Load() == 1) })
			now := fc.Now()
			if a.e.Leading() && !now.Before(end.Add(-renew/2)) {
				t.Fatalf("a still leads at %v, its lease ends at %v: it must step down %v before", now, end, renew/2)
			}
			if b.e.Leading() {
				takeover = now
				break
			}
		}
		if takeover.IsZero() {
			t.Fatalf("b did not take over by %v; a's lease ended at %v", fc.Now(), end)
		}
		hang.WaitFor(t, "b leads", func() bool { return b.leading.Load() == 1 })
		if takeover.Before(end) || takeover.After(end.Add(renew)) {
			t.Fatalf("b took over at %v; a's lease ended at %v: want within a renewal interval (%v) after", takeover, end, renew)
		}
		if a.leading.Load() != 0 {
			t.Fatal("a still runs leader work")
		}
	})
}

func TestLeaderWhoseLeaseIsTakenStopsAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		a := start(t, s, fc, "a")
		hang.WaitFor(t, "a leads", func() bool { return a.leading.Load() == 1 })
		// Someone else takes the row (as after a long pause of a).
		if _, err := s.Exec(context.Background(), store.Stmt(`UPDATE leader_leases SET holder = 'x', version = version + 1 WHERE name = 'core'`)); err != nil {
			t.Fatal(err)
		}
		step(t, fc, 1, renew)
		hang.WaitFor(t, "a stops leading", func() bool { return !a.e.Leading() && a.leading.Load() == 0 })
	})
}

func TestCleanStopReleasesTheLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		a := start(t, s, fc, "a")
		hang.WaitFor(t, "a leads", func() bool { return a.leading.Load() == 1 })
		b := start(t, s, fc, "b")
		hang.BlockUntil(t, fc, 2, "a renewing, b campaigning")
		a.cancel()
		hang.Recv(t, a.done, "a stopped")
		// b takes over at its next attempt, without waiting for the TTL.
		step(t, fc, 1, renew)
		hang.WaitFor(t, "b leads", func() bool { return b.leading.Load() == 1 })
		if a.terms.Load() != 1 || b.terms.Load() != 1 {
			t.Fatalf("terms a=%d b=%d", a.terms.Load(), b.terms.Load())
		}
	})
}

// leaseEnd reads when the lease row runs out.
func leaseEnd(t *testing.T, s store.Store) time.Time {
	t.Helper()
	rows, err := s.Query(context.Background(), `SELECT expires_at FROM leader_leases WHERE name = 'core'`)
	if err != nil || rows.Len() != 1 {
		t.Fatalf("read lease: %v", err)
	}
	var ms int64
	if err := rows.Scan(0, &ms); err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms).UTC()
}

// TestLeaderCutOffLosesBeforeItsLeaseEnds: a leader that cannot renew calls
// its loss hook, and stops its work, half a renewal interval before its lease could
// run out — so a successor that takes over once it has run out never meets
// its work.
func TestLeaderCutOffLosesBeforeItsLeaseEnds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		var lostAt atomic.Int64
		a := start(t, s, fc, "a", func() { lostAt.Store(fc.Now().UnixMilli()) })
		hang.WaitFor(t, "a leads", func() bool { return a.leading.Load() == 1 })
		step(t, fc, 1, renew) // one renewal
		hang.WaitFor(t, "renewed", func() bool { return leaseEnd(t, s).Equal(fc.Now().Add(ttl)) })
		end := leaseEnd(t, s)
		a.db.broken.Store(true)
		for lostAt.Load() == 0 {
			step(t, fc, 1, renew/10) // fine enough to land on the deadlines
		}
		hang.WaitFor(t, "a's work stopped", func() bool { return a.leading.Load() == 0 && !a.e.Leading() })
		if lost := time.UnixMilli(lostAt.Load()).UTC(); lost.After(end.Add(-renew / 2)) {
			t.Fatalf("a lost leadership at %v, its lease ends at %v: want at least %v before", lost, end, renew/2)
		}
	})
}

// hangingRenewals makes renewals hang until their context ends, as a
// request to an unreachable node does.
type hangingRenewals struct {
	store.Store
	hang atomic.Bool
}

func (h *hangingRenewals) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.Store.Exec(ctx, batch...)
}

// TestRenewalThatHangsStepsDown: a renewal that does not answer counts as
// failed at the step-down deadline; the leader does not lead on while it
// waits for the answer.
func TestRenewalThatHangsStepsDown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		db := &hangingRenewals{Store: s}
		// A short lease: the renewal gives up after (ttl - renew/2 - renew) of real time.
		lost := make(chan struct{})
		e := leader.New(db, fc, slog.New(slog.NewTextHandler(io.Discard, nil)), "core", "a", 2*time.Second, time.Second, func() { close(lost) })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var leading atomic.Bool
		go func() {
			defer close(done)
			e.Run(ctx, func(ctx context.Context) { leading.Store(true); <-ctx.Done(); leading.Store(false) })
		}()
		defer func() { cancel(); hang.Recv(t, done, "the elector stopped") }()
		hang.WaitFor(t, "a leads", func() bool { return leading.Load() })
		db.hang.Store(true)
		hang.BlockUntil(t, fc, 1, "the elector sleeping")
		fc.Advance(time.Second) // the renewal starts, and hangs
		// It is given up at the step-down deadline (half a second away):
		// the elector sleeps until then, and steps down.
		hang.WaitFor(t, "the renewal given up", func() bool { return fc.Waiters() == 1 })
		fc.Advance(time.Second)
		hang.Recv(t, lost, "leadership lost")
		hang.WaitFor(t, "a's work stopped", func() bool { return !leading.Load() && !e.Leading() })
	})
}

// TestCleanStopKeepsTheLeaseUntilWorkWoundDown: after a clean stop the
// leader stops leading at once but renews its lease while its work winds
// down (the orchestrator's shutdown grace), so that no other instance takes
// over while it runs; then it hands the lease over.
func TestCleanStopKeepsTheLeaseUntilWorkWoundDown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		windDown := make(chan struct{})
		var working atomic.Bool
		a := &instance{db: &breakable{Store: s}, done: make(chan struct{})}
		a.e = leader.New(a.db, fc, slog.New(slog.NewTextHandler(io.Discard, nil)), "core", "a", ttl, renew, nil)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer close(a.done)
			a.e.Run(ctx, func(ctx context.Context) {
				working.Store(true)
				<-ctx.Done()
				<-windDown // handlers finishing within their grace
				working.Store(false)
			})
		}()
		var wound sync.Once
		windUp := func() { wound.Do(func() { close(windDown) }) }
		t.Cleanup(func() { cancel(); windUp(); hang.Recv(t, a.done, "a stopped") })
		hang.WaitFor(t, "a leads", func() bool { return working.Load() })
		b := start(t, s, fc, "b")
		hang.BlockUntil(t, fc, 2, "a renewing, b campaigning")
		cancel()
		hang.WaitFor(t, "a stops leading", func() bool { return !a.e.Leading() })
		for range 3 * int(ttl/renew) {
			// a keeps renewing (its timer) while b campaigns (b's); both
			// act on each step.
			step(t, fc, 2, renew)
			if b.leading.Load() != 0 || b.e.Leading() {
				t.Fatal("b took over while a's work was winding down")
			}
		}
		windUp()
		hang.Recv(t, a.done, "a stopped")
		step(t, fc, 1, renew)
		hang.WaitFor(t, "b leads", func() bool { return b.leading.Load() == 1 })
	})
}
