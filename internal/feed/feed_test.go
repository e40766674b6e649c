package feed_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// hangGuard bounds every wait of these tests, so that a failing test ends
// with a message instead of hanging until the suite's timeout. It is not a
// speed claim: a passing run never comes near it.
const hangGuard = 2 * time.Minute

func write(t testing.TB, a *transition.Applier, project string, n int) {
	t.Helper()
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{OrganizationID: "o1", ProjectID: project, EntityType: "ticket", EntityID: "t1", Type: "ticket.touched"}
		evs[i].SetActor(event.System)
	}
	if err := a.Apply(context.Background(), &transition.Transition{Events: evs}); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, s *feed.Subscription, n int) []event.Event {
	t.Helper()
	var out []event.Event
	timeout := time.After(hangGuard)
	for len(out) < n {
		select {
		case e, ok := <-s.C():
			if !ok {
				t.Fatalf("subscription closed after %d of %d events", len(out), n)
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("got %d of %d events", len(out), n)
		}
	}
	return out
}

// start runs a feed on s (its timers on clk) until the test ends, and
// returns it with an applier that nudges it on every commit.
func start(t *testing.T, s store.Store, clk clock.Clock, cfg feed.Config) (*feed.Feed, *transition.Applier) {
	t.Helper()
	f := feed.New(s, clk, nil, cfg)
	a := &transition.Applier{Store: s, Clock: clock.Real{}}
	a.Subscribe(f.OnCommit)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); wait(t, done, "the feed to stop") })
	wait(t, f.Ready(), "the feed to start")
	return f, a
}

// wait waits for ch to be closed (or to deliver), failing the test after
// the hang guard.
func wait[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// closed fails unless the subscription's channel is closed and empty now.
func closed(t *testing.T, s *feed.Subscription) {
	t.Helper()
	select {
	case e, ok := <-s.C():
		if ok {
			t.Fatalf("event %d on a subscription that has ended", e.Seq)
		}
	default:
		t.Fatal("the subscription's channel is open")
	}
}

func TestFeedFanOutInOrderWithFilters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		// A write before Run starts is before the start position.
		pre := &transition.Applier{Store: s, Clock: clock.Real{}}
		write(t, pre, "p1", 3)
		f, a := start(t, s, clock.Real{}, feed.Config{Interval: time.Hour}) // only nudges wake it
		if f.Last() != 3 {
			t.Fatalf("start position %d, want 3", f.Last())
		}
		all := f.Subscribe(nil)
		p2 := f.Subscribe(func(e event.Event) bool { return e.ProjectID == "p2" })
		if all.Start() != 3 || p2.Start() != 3 {
			t.Fatalf("starts %d %d", all.Start(), p2.Start())
		}
		write(t, a, "p1", 2)
		write(t, a, "p2", 2)
		got := recv(t, all, 4)
		for i, e := range got {
			if e.Seq != int64(4+i) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
		if g := recv(t, p2, 2); g[0].Seq != 6 || g[1].Seq != 7 {
			t.Fatalf("p2 got %d, %d", g[0].Seq, g[1].Seq)
		}
		all.Close()
		all.Close() // idempotent
		closed(t, all)
		if f.Subscribers() != 1 {
			t.Fatalf("%d subscribers", f.Subscribers())
		}
	})
}

// Another writer (no nudge: another instance) is seen when the interval
// has passed on the feed's clock.
func TestFeedTailsOtherWritersEveryInterval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		f, _ := start(t, s, fk, feed.Config{Interval: time.Minute})
		sub := f.Subscribe(nil)
		blockUntil(t, fk, 1) // the feed has read the log and sleeps
		other := &transition.Applier{Store: s, Clock: clock.Real{}}
		write(t, other, "p1", 2)
		fk.Advance(time.Minute) // nothing else can wake it
		if got := recv(t, sub, 2); got[0].Seq != 1 || got[1].Seq != 2 {
			t.Fatalf("got seqs %d, %d", got[0].Seq, got[1].Seq)
		}
	})
}

// blockUntil is fk.BlockUntil(n), failing the test after the hang guard.
func blockUntil(t *testing.T, fk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() { fk.BlockUntil(n); close(done) }()
	wait(t, done, fmt.Sprintf("%d timers on the fake clock", n))
}

// A subscriber that does not read is dropped with Lagged; one that reads
// receives everything, unblocked.
func TestFeedSlowSubscriberLagsAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		f, a := start(t, s, clock.Real{}, feed.Config{Interval: time.Hour, Buffer: 4})
		slow := f.Subscribe(nil)
		fast := f.Subscribe(nil)
		for i := range 20 {
			write(t, a, "p1", 1)
			if e := recv(t, fast, 1)[0]; e.Seq != int64(i+1) {
				t.Fatalf("fast got seq %d, want %d", e.Seq, i+1)
			}
		}
		// Lagged was closed when event 5 was fanned out, before fast
		// received event 6.
		select {
		case <-slow.Lagged():
		default:
			t.Fatal("slow subscriber not lagged")
		}
		var seqs []int64
		for e := range slow.C() {
			seqs = append(seqs, e.Seq)
		}
		if !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
			t.Fatalf("slow kept %v, want its buffer [1 2 3 4]", seqs)
		}
		if f.Subscribers() != 1 {
			t.Fatalf("%d subscribers, want the fast one", f.Subscribers())
		}
		select {
		case <-fast.Lagged():
			t.Fatal("fast subscriber lagged")
		default:
		}
	})
}

// Batches larger than Batch are read in pages without loss: every seq,
// once, in order.
func TestFeedPagesLargeBursts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		f, a := start(t, s, clock.Real{}, feed.Config{Interval: time.Hour, Batch: 7, Buffer: 100})
		sub := f.Subscribe(nil)
		write(t, a, "p1", 50)
		for i, e := range recv(t, sub, 50) {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
		if f.Last() != 50 {
			t.Fatalf("feed position %d, want 50", f.Last())
		}
	})
}

func TestFeedSubscribeBeforeRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		f := feed.New(s, clock.Real{}, nil, feed.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the feed cannot start before the context ends: it never runs
		if _, err := f.SubscribeContext(ctx, nil); err != feed.ErrNotRunning {
			t.Fatalf("err %v", err)
		}
		// Stopping Run ends the subscriptions (not lagged).
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.Run(rctx); close(done) }()
		sub := f.Subscribe(nil)
		stop()
		wait(t, done, "Run to stop")
		closed(t, sub)
		select {
		case <-sub.Lagged():
			t.Fatal("lagged on stop")
		default:
		}
	})
}
