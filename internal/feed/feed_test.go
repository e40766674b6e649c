package feed_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
	"github.com/ballet/ballet/internal/transition"
)

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
	timeout := time.After(10 * time.Second)
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

func start(t *testing.T, s store.Store, cfg feed.Config) (*feed.Feed, *transition.Applier) {
	f := feed.New(s, clock.Real{}, nil, cfg)
	a := &transition.Applier{Store: s, Clock: clock.Real{}, OnCommit: func(transition.Committed) { f.Nudge() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	<-f.Ready()
	return f, a
}

func TestFeedFanOutInOrderWithFilters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		// A write before Run starts is before the start position.
		pre := &transition.Applier{Store: s, Clock: clock.Real{}}
		write(t, pre, "p1", 3)
		f, a := start(t, s, feed.Config{Interval: time.Hour}) // only nudges wake it
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
		if _, ok := <-all.C(); ok {
			t.Fatal("C open after Close")
		}
		if f.Subscribers() != 1 {
			t.Fatalf("%d subscribers", f.Subscribers())
		}
	})
}

// Another writer (no nudge: another instance) is seen within one interval.
func TestFeedTailsOtherWritersEveryInterval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		f, _ := start(t, s, feed.Config{Interval: 50 * time.Millisecond})
		sub := f.Subscribe(nil)
		other := &transition.Applier{Store: s, Clock: clock.Real{}}
		t0 := time.Now()
		write(t, other, "p1", 1)
		recv(t, sub, 1)
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

// A subscriber that does not read is dropped with Lagged; one that reads
// receives everything, unblocked.
func TestFeedSlowSubscriberLagsAlone(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	f, a := start(t, s, feed.Config{Interval: time.Hour, Buffer: 4})
	slow := f.Subscribe(nil)
	fast := f.Subscribe(nil)
	for i := range 20 {
		write(t, a, "p1", 1)
		if e := recv(t, fast, 1)[0]; e.Seq != int64(i+1) {
			t.Fatalf("fast got seq %d, want %d", e.Seq, i+1)
		}
	}
	select {
	case <-slow.Lagged():
	case <-time.After(5 * time.Second):
		t.Fatal("slow subscriber not lagged")
	}
	var seqs []int64
	for e := range slow.C() {
		seqs = append(seqs, e.Seq)
	}
	if len(seqs) != 4 || seqs[0] != 1 || seqs[3] != 4 {
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
}

// Batches larger than Batch are read in pages without loss.
func TestFeedPagesLargeBursts(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	f, a := start(t, s, feed.Config{Interval: time.Hour, Batch: 7, Buffer: 100})
	sub := f.Subscribe(nil)
	write(t, a, "p1", 50)
	got := recv(t, sub, 50)
	if got[49].Seq != 50 || f.Last() != 50 {
		t.Fatalf("last %d, feed %d", got[49].Seq, f.Last())
	}
}

func TestFeedSubscribeBeforeRun(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	f := feed.New(s, clock.Real{}, nil, feed.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.SubscribeContext(ctx, nil); err != feed.ErrNotRunning {
		t.Fatalf("err %v", err)
	}
	// Stopping Run ends the subscriptions (not lagged).
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(rctx); close(done) }()
	sub := f.Subscribe(nil)
	stop()
	<-done
	if _, ok := <-sub.C(); ok {
		t.Fatal("C open after Run stopped")
	}
	select {
	case <-sub.Lagged():
		t.Fatal("lagged on stop")
	default:
	}
}
