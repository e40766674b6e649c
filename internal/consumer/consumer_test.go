package consumer_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// record commits n events (of a type no consumer here cares about).
func record(t *testing.T, a *transition.Applier, n int) {
	t.Helper()
	for range n {
		if err := a.Apply(context.Background(), &transition.Transition{Events: []event.Event{
			event.Of(notify.Actor, "", "", "x", notify.NotificationRead{Recipient: "alice", Cause: notify.CauseTicketDone, Item: "A-1"})}}); err != nil {
			t.Fatal(err)
		}
	}
}

// seen is a decider that records the seq of every event record made in
// the table seen (a seq written twice breaks its primary key), with an
// event of its own (every change records one), which it leaves alone.
func seen(ctx context.Context, evs []event.Event) (*transition.Transition, error) {
	t := &transition.Transition{}
	for _, e := range evs {
		p, _, err := event.Decode[notify.NotificationRead](e)
		if err != nil {
			return nil, err
		}
		if p.Cause != notify.CauseTicketDone {
			continue
		}
		t.Statements = append(t.Statements, store.Stmt(`INSERT INTO seen (seq) VALUES (?)`, e.Seq))
		t.Events = append(t.Events, event.Of(notify.Actor, "", "", "x", notify.NotificationRead{Recipient: "alice", Cause: "seen", Item: "A-1"}))
	}
	return t, nil
}

// A new consumer starts at the log's head: the history before it is not
// its to process. Then every later event is processed exactly once, also
// by several consumers of that name passing at once (two Core instances):
// what one commits for an event the others never write again.
func TestEveryEventOnceFromTheHead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
		a := &transition.Applier{Store: s, Clock: clk}
		if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE seen (seq INTEGER PRIMARY KEY)`)); err != nil {
			t.Fatal(err)
		}
		record(t, a, 3)
		head, err := event.LastSeq(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		c := func() *consumer.Consumer {
			return (&consumer.Consumer{Name: "test", Store: s, Applier: a, Clock: clk, Decide: seen, Batch: 4}).Init()
		}
		if cur, err := consumer.Cursor(ctx, s, "test", clk.Now()); err != nil || cur != head {
			t.Fatalf("a new consumer's cursor: %d, %v; want the head %d", cur, err, head)
		}
		record(t, a, 25)
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for range 3 {
			wg.Go(func() {
				if _, err := c().Pass(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("pass: %v", err)
		}
		// A lost race may leave events to the next pass: one more catches up.
		if _, err := c().Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM seen`); n != 25 {
			t.Errorf("%d events processed, want the 25 after the head", n)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM seen WHERE seq <= `+strconv.FormatInt(head, 10)); n != 0 {
			t.Errorf("%d events of the history before the consumer processed", n)
		}
		if n, age, err := consumer.Lag(ctx, s, "test", clk.Now()); err != nil || n != 0 || age != 0 {
			t.Errorf("lag %d events, %v, %v; want caught up", n, age, err)
		}
	})
}

// A decider's error writes nothing and leaves the cursor: the events are
// decided again on the next pass.
func TestAFailedDecisionLeavesTheCursor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
		a := &transition.Applier{Store: s, Clock: clk}
		from, err := consumer.Cursor(ctx, s, "test", clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		record(t, a, 2)
		fail := true
		c := (&consumer.Consumer{Name: "test", Store: s, Applier: a, Clock: clk, Decide: func(ctx context.Context, evs []event.Event) (*transition.Transition, error) {
			if fail {
				return nil, context.DeadlineExceeded
			}
			return nil, nil
		}}).Init()
		if _, err := c.Pass(ctx); err == nil {
			t.Fatal("a failed decision passed")
		}
		if cur, _ := consumer.Cursor(ctx, s, "test", clk.Now()); cur != from {
			t.Errorf("cursor %d after a failed decision, want %d", cur, from)
		}
		fail = false
		if _, err := c.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if cur, _ := consumer.Cursor(ctx, s, "test", clk.Now()); cur != from+2 {
			t.Errorf("cursor %d, want %d", cur, from+2)
		}
	})
}

// Jobs alone (a consumer that only schedules work for later, like an
// escalation's timer) are written with the cursor's advance, without an
// event, once per event.
func TestJobsAloneAreWrittenWithTheCursor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
		a := &transition.Applier{Store: s, Clock: clk}
		if _, err := consumer.Cursor(ctx, s, "test", clk.Now()); err != nil {
			t.Fatal(err)
		}
		record(t, a, 3)
		before := storetest.Count(t, s, `SELECT COUNT(*) FROM events`)
		c := (&consumer.Consumer{Name: "test", Store: s, Applier: a, Clock: clk, Decide: func(ctx context.Context, evs []event.Event) (*transition.Transition, error) {
			t := &transition.Transition{}
			for _, e := range evs {
				t.Jobs = append(t.Jobs, job.Spec{Kind: "test.later", DedupeKey: "later:" + e.ID, RunAt: clk.Now().Add(time.Hour)})
			}
			return t, nil
		}}).Init()
		for range 2 {
			if _, err := c.Pass(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM jobs WHERE kind = 'test.later'`); n != 3 {
			t.Errorf("%d jobs, want one per event (3)", n)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM events`); n != before {
			t.Errorf("%d events after scheduling jobs, want %d: jobs alone record none", n, before)
		}
	})
}

// Committed events that do not wake a consumer are passed over within
// Settle, not left for Interval: the consumer's lag stays small while the
// log grows with events it does not act on. A waking event still nudges at
// once.
func TestEventsThatDoNotWakeArePassedOverWithinSettle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		clk := clock.NewFake(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
		a := &transition.Applier{Store: s, Clock: clk}
		if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE seen (seq INTEGER PRIMARY KEY)`)); err != nil {
			t.Fatal(err)
		}
		c := (&consumer.Consumer{Name: "test", Store: s, Applier: a, Clock: clk, Decide: seen,
			Interval: time.Hour, Settle: 200 * time.Millisecond}).Init()
		a.Subscribe(c.OnCommit)
		done := make(chan struct{})
		go func() { defer close(done); c.Run(ctx) }()
		defer func() { cancel(); <-done }()
		// waiters waits until the loop waits on n timers (the interval,
		// and the settle after an event), failing after a while.
		waiters := func(n int, what string) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for clk.Waiters() < n {
				if time.Now().After(deadline) {
					t.Fatalf("the consumer never waited on %d timers (%s)", n, what)
				}
				time.Sleep(time.Millisecond)
			}
		}
		lag := func() int64 {
			t.Helper()
			n, _, err := consumer.Lag(ctx, s, "test", clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		waiters(1, "the interval after the first pass")
		record(t, a, 2)
		waiters(2, "the settle after events that do not wake it")
		if n := lag(); n != 2 {
			t.Fatalf("lag %d events before Settle passed, want the 2 recorded", n)
		}
		head, err := event.LastSeq(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(200 * time.Millisecond)
		deadline := time.Now().Add(30 * time.Second)
		for {
			cur, err := consumer.Cursor(ctx, s, "test", clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			if cur >= head {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cursor %d after Settle, want the head %d (the interval is an hour)", cur, head)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM seen`); n != 2 {
			t.Errorf("%d events decided, want 2", n)
		}
	})
}
