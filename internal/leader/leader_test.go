package leader_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/leader"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
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

func start(t *testing.T, s store.Store, fc *clock.Fake, id string) *instance {
	in := &instance{db: &breakable{Store: s}, done: make(chan struct{})}
	in.e = leader.New(in.db, fc, slog.New(slog.NewTextHandler(io.Discard, nil)), "core", id, ttl, renew)
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
	t.Cleanup(func() { cancel(); <-in.done })
	return in
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// step advances the fake clock by d once both electors sleep.
func step(fc *clock.Fake, n int, d time.Duration) {
	fc.BlockUntil(n)
	fc.Advance(d)
}

func TestOneLeaderAndTakeoverWithinTTL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		a := start(t, s, fc, "a")
		waitFor(t, "a leads", func() bool { return a.e.Leading() && a.leading.Load() == 1 })
		b := start(t, s, fc, "b")
		// Several renewals: a keeps the lease, b never leads.
		for range 6 {
			step(fc, 2, time.Second)
			if b.e.Leading() || b.leading.Load() != 0 {
				t.Fatal("two leaders")
			}
		}
		if !a.e.Leading() {
			t.Fatal("a lost the lease while renewing")
		}
		// a is cut off: it steps down before its lease can have run out,
		// and b takes over once it has.
		a.db.broken.Store(true)
		cut := fc.Now()
		var stepDown, takeover time.Duration
		for range 40 {
			step(fc, 2, time.Second)
			waitFor(t, "a settles", func() bool { return a.e.Leading() == (a.leading.Load() == 1) })
			if stepDown == 0 && !a.e.Leading() {
				stepDown = fc.Now().Sub(cut)
			}
			if b.e.Leading() {
				takeover = fc.Now().Sub(cut)
				break
			}
		}
		waitFor(t, "b leads", func() bool { return b.leading.Load() == 1 })
		if stepDown == 0 || takeover == 0 {
			t.Fatalf("a stepped down after %v, b took over after %v", stepDown, takeover)
		}
		if stepDown > ttl {
			t.Fatalf("a stepped down %v after it was cut off: later than the TTL %v", stepDown, ttl)
		}
		if takeover < stepDown || takeover > ttl+renew {
			t.Fatalf("b took over %v after the cut (a stepped down at %v); want within TTL+renew %v", takeover, stepDown, ttl+renew)
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
		waitFor(t, "a leads", func() bool { return a.leading.Load() == 1 })
		// Someone else takes the row (as after a long pause of a).
		if _, err := s.Exec(context.Background(), store.Stmt(`UPDATE leader_leases SET holder = 'x', version = version + 1 WHERE name = 'core'`)); err != nil {
			t.Fatal(err)
		}
		step(fc, 1, renew)
		waitFor(t, "a stops leading", func() bool { return !a.e.Leading() && a.leading.Load() == 0 })
	})
}

func TestCleanStopReleasesTheLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
		a := start(t, s, fc, "a")
		waitFor(t, "a leads", func() bool { return a.leading.Load() == 1 })
		b := start(t, s, fc, "b")
		fc.BlockUntil(2)
		a.cancel()
		<-a.done
		// b takes over at its next attempt, without waiting for the TTL.
		step(fc, 1, renew)
		waitFor(t, "b leads", func() bool { return b.leading.Load() == 1 })
		if a.terms.Load() != 1 || b.terms.Load() != 1 {
			t.Fatalf("terms a=%d b=%d", a.terms.Load(), b.terms.Load())
		}
	})
}
