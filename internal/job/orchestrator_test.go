package job_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
	"github.com/ballet/ballet/internal/transition"
)

var start = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type world struct {
	s  store.Store
	fc *clock.Fake
	o  *job.Orchestrator
	a  *transition.Applier
}

func setup(t *testing.T, s store.Store, cfg job.Config) *world {
	t.Helper()
	fc := clock.NewFake(start)
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	o := job.NewOrchestrator(s, fc, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, "test-1", nil)
	a := &transition.Applier{Store: s, Clock: fc, OnCommit: func(c transition.Committed) {
		if c.HasJobs {
			o.Notify()
		}
	}}
	return &world{s: s, fc: fc, o: o, a: a}
}

// run starts the orchestrator and waits until its loop sleeps.
func (w *world) run(t *testing.T, o *job.Orchestrator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		w.untilClosed(t, done)
	})
}

// untilClosed moves the fake clock on until done is closed, so that a
// shutdown grace timer created at any moment passes.
func (w *world) untilClosed(t *testing.T, done <-chan struct{}) {
	t.Helper()
	waitFor(t, "orchestrator stopped", func() bool {
		select {
		case <-done:
			return true
		default:
			w.fc.Advance(time.Second)
			return false
		}
	})
}

func (w *world) enqueue(t *testing.T, specs ...job.Spec) {
	t.Helper()
	e := event.Event{EntityType: "test", EntityID: "t1", Type: "test.enqueued"}
	e.SetActor(event.System)
	if err := w.a.Apply(context.Background(), &transition.Transition{Events: []event.Event{e}, Jobs: specs}); err != nil {
		t.Fatal(err)
	}
}

type row struct {
	status    string
	attempt   int
	runAt     time.Time
	lastError string
}

func (w *world) jobs(t *testing.T, kind string) []row {
	t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT status, attempt, run_at, COALESCE(last_error, '') FROM jobs WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]row, rows.Len())
	for i := range out {
		var at int64
		if err := rows.Scan(i, &out[i].status, &out[i].attempt, &at, &out[i].lastError); err != nil {
			t.Fatal(err)
		}
		out[i].runAt = time.UnixMilli(at).UTC()
	}
	return out
}

// waitFor polls the database until cond holds. Time on the fake clock does
// not move while it waits.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settle waits until the orchestrator's loop sleeps on its poll timer again.
func (w *world) settle() { w.fc.BlockUntil(1) }

func TestWakesAtOnceOnEnqueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		var ran atomic.Int32
		w.o.Handle("k", func(context.Context, *job.Job) error { ran.Add(1); return nil })
		w.run(t, w.o)
		w.settle()
		w.enqueue(t, job.Spec{Kind: "k"})
		// The fake clock never moves: only the in-process wake can start it.
		waitFor(t, "job done", func() bool { r := w.jobs(t, "k"); return len(r) == 1 && r[0].status == job.StatusDone })
		if ran.Load() != 1 {
			t.Fatalf("handler ran %d times", ran.Load())
		}
	})
}

func TestBackoffScheduleThenDead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{BackoffCap: 10 * time.Second})
		w.o.Handle("fail", func(_ context.Context, j *job.Job) error { return fmt.Errorf("boom %d", j.Attempt) })
		w.run(t, w.o)
		w.settle()
		w.enqueue(t, job.Spec{Kind: "fail", MaxAttempts: 5})
		wantDelays := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second}
		for i, d := range wantDelays {
			attempt := i + 1
			waitFor(t, fmt.Sprintf("attempt %d failed", attempt), func() bool {
				r := w.jobs(t, "fail")
				return r[0].status == job.StatusPending && r[0].attempt == attempt
			})
			r := w.jobs(t, "fail")[0]
			if got := r.runAt.Sub(w.fc.Now()); got != d {
				t.Fatalf("after attempt %d the job is due in %v, want %v", attempt, got, d)
			}
			if r.lastError != fmt.Sprintf("boom %d", attempt) {
				t.Fatalf("last error %q", r.lastError)
			}
			// Just before it is due, nothing runs.
			w.settle()
			w.fc.Advance(d - 10*time.Millisecond)
			w.settle()
			if r := w.jobs(t, "fail")[0]; r.attempt != attempt || r.status != job.StatusPending {
				t.Fatalf("attempt %d ran early (status %s attempt %d)", attempt+1, r.status, r.attempt)
			}
			w.fc.Advance(10 * time.Millisecond)
		}
		waitFor(t, "dead", func() bool { return w.jobs(t, "fail")[0].status == job.StatusDead })
		if r := w.jobs(t, "fail")[0]; r.attempt != 5 || r.lastError != "boom 5" {
			t.Fatalf("dead job: attempt %d, last error %q", r.attempt, r.lastError)
		}
		if job.Backoff(1, 10*time.Minute) != 2*time.Second || job.Backoff(9, 10*time.Minute) != 512*time.Second || job.Backoff(10, 10*time.Minute) != 10*time.Minute {
			t.Fatal("backoff policy is not 2, 4, 8 … s capped at 10 min")
		}
	})
}

func TestPermanentErrorAndMissingHandlerAreDeadAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		w.o.Handle("perm", func(context.Context, *job.Job) error { return job.Permanent(errors.New("bad input")) })
		w.o.Handle("panics", func(context.Context, *job.Job) error { panic("oops") })
		w.run(t, w.o)
		w.settle()
		w.enqueue(t, job.Spec{Kind: "perm"}, job.Spec{Kind: "orphan"}, job.Spec{Kind: "panics"})
		for kind, msg := range map[string]string{
			"perm":   "permanent: bad input",
			"orphan": `permanent: no handler for job kind "orphan"`,
			"panics": "permanent: handler panicked: oops",
		} {
			waitFor(t, kind+" dead", func() bool { return w.jobs(t, kind)[0].status == job.StatusDead })
			if r := w.jobs(t, kind)[0]; r.attempt != 1 || r.lastError != msg {
				t.Fatalf("%s: attempt %d, last error %q, want 1 and %q", kind, r.attempt, r.lastError, msg)
			}
		}
	})
}

func TestAtMostConcurrencyHandlers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		release := make(chan struct{})
		var now, peak atomic.Int32
		w.o.Handle("block", func(context.Context, *job.Job) error {
			n := now.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			<-release
			now.Add(-1)
			return nil
		})
		w.run(t, w.o)
		w.settle()
		specs := make([]job.Spec, 20)
		for i := range specs {
			specs[i] = job.Spec{Kind: "block"}
		}
		w.enqueue(t, specs...)
		waitFor(t, "8 running", func() bool { return now.Load() == 8 })
		w.settle()
		w.fc.Advance(time.Second) // a poll pass while full claims nothing
		w.settle()
		if n := now.Load(); n != 8 {
			t.Fatalf("%d handlers run at once, want 8", n)
		}
		close(release) // freed slots are refilled at once, without a poll
		waitFor(t, "all done", func() bool {
			for _, r := range w.jobs(t, "block") {
				if r.status != job.StatusDone {
					return false
				}
			}
			return true
		})
		if p := peak.Load(); p != 8 {
			t.Fatalf("peak concurrency %d, want 8", p)
		}
	})
}

// TestExpiredLeaseIsReclaimedAndLateFinisherLoses: the first holder hangs
// past its lease; a second orchestrator re-claims and completes the job;
// the first holder's late result must not overwrite anything.
func TestExpiredLeaseIsReclaimedAndLateFinisherLoses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{Lease: time.Minute})
		hang := make(chan struct{})
		var calls sync.Map
		handler := func(owner string) job.Handler {
			return func(_ context.Context, j *job.Job) error {
				calls.Store(fmt.Sprintf("%s/%d", owner, j.Attempt), true)
				if j.Attempt == 1 {
					<-hang
					return errors.New("late failure that must be discarded")
				}
				return nil
			}
		}
		w.o.Handle("slow", handler("o1"))
		w.run(t, w.o)
		w.settle()
		w.enqueue(t, job.Spec{Kind: "slow"})
		waitFor(t, "first claim", func() bool { _, ok := calls.Load("o1/1"); return ok })

		o2 := job.NewOrchestrator(s, w.fc, slog.New(slog.NewTextHandler(io.Discard, nil)), job.Config{Lease: time.Minute, Poll: time.Second}, "test-2", nil)
		o2.Handle("slow", handler("o2"))
		w.run(t, o2)
		w.fc.BlockUntil(2)
		w.fc.Advance(59 * time.Second)
		w.fc.BlockUntil(2)
		if r := w.jobs(t, "slow")[0]; r.attempt != 1 {
			t.Fatalf("re-claimed before the lease ran out: attempt %d", r.attempt)
		}
		w.fc.Advance(time.Second + time.Millisecond)
		waitFor(t, "re-claimed and done", func() bool {
			r := w.jobs(t, "slow")[0]
			return r.status == job.StatusDone && r.attempt == 2
		})
		close(hang) // the first holder finishes late
		waitFor(t, "late finisher returned", func() bool { return w.o.Running() == 0 })
		if r := w.jobs(t, "slow")[0]; r.status != job.StatusDone || r.attempt != 2 || r.lastError != "" {
			t.Fatalf("late finisher overwrote the job: %+v", r)
		}
	})
}

func TestDedupeKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		release := make(chan struct{})
		w.o.Handle("d", func(context.Context, *job.Job) error { <-release; return nil })
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"})
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"}) // pending: no-op
		if n := len(w.jobs(t, "d")); n != 1 {
			t.Fatalf("%d jobs after a duplicate enqueue of a pending key", n)
		}
		w.run(t, w.o)
		waitFor(t, "running", func() bool { return w.jobs(t, "d")[0].status == job.StatusRunning })
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"}) // running: no-op
		if n := len(w.jobs(t, "d")); n != 1 {
			t.Fatalf("%d jobs after a duplicate enqueue of a running key", n)
		}
		close(release)
		waitFor(t, "done", func() bool { return w.jobs(t, "d")[0].status == job.StatusDone })
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"}) // finished: the key is free again
		waitFor(t, "second job done", func() bool {
			r := w.jobs(t, "d")
			return len(r) == 2 && r[1].status == job.StatusDone
		})
	})
}

func TestShutdownLetsHandlersFinish(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{ShutdownGrace: 30 * time.Second})
		release := make(chan struct{})
		var cancelled atomic.Bool
		w.o.Handle("slow", func(ctx context.Context, _ *job.Job) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				cancelled.Store(true)
				return ctx.Err()
			}
		})
		w.o.Handle("stuck", func(ctx context.Context, _ *job.Job) error { <-ctx.Done(); cancelled.Store(true); return ctx.Err() })
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { w.o.Run(ctx); close(stopped) }()
		w.settle()
		w.enqueue(t, job.Spec{Kind: "slow"})
		waitFor(t, "running", func() bool { return w.o.Running() == 1 })
		cancel()
		close(release)
		<-stopped
		if cancelled.Load() {
			t.Fatal("a handler that finished within the grace period was cancelled")
		}
		if r := w.jobs(t, "slow")[0]; r.status != job.StatusDone {
			t.Fatalf("status %s after graceful shutdown", r.status)
		}

		// A handler that does not finish is cancelled when the grace is over;
		// its job stays claimable, so it runs again.
		ctx, cancel = context.WithCancel(context.Background())
		stopped = make(chan struct{})
		go func() { w.o.Run(ctx); close(stopped) }()
		w.settle()
		w.enqueue(t, job.Spec{Kind: "stuck"})
		waitFor(t, "stuck running", func() bool { return w.o.Running() == 1 })
		cancel()
		w.untilClosed(t, stopped)
		if !cancelled.Load() {
			t.Fatal("the stuck handler was not cancelled after the grace period")
		}
		if r := w.jobs(t, "stuck")[0]; r.status != job.StatusPending || r.attempt != 1 {
			t.Fatalf("cancelled job: %+v, want pending for another attempt", r)
		}
	})
}

func TestSnoozeRunsLaterWithoutUsingAnAttempt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		var calls atomic.Int32
		w.o.Handle("poll", func(context.Context, *job.Job) error {
			if calls.Add(1) < 4 {
				return job.Snooze(30 * time.Second)
			}
			return nil
		})
		w.run(t, w.o)
		w.settle()
		w.enqueue(t, job.Spec{Kind: "poll", MaxAttempts: 1})
		for i := 1; i <= 3; i++ {
			waitFor(t, "snoozed", func() bool {
				r := w.jobs(t, "poll")[0]
				return calls.Load() == int32(i) && r.status == job.StatusPending && r.attempt == 0
			})
			if r := w.jobs(t, "poll")[0]; r.runAt.Sub(w.fc.Now()) != 30*time.Second {
				t.Fatalf("snoozed until %v", r.runAt.Sub(w.fc.Now()))
			}
			w.settle()
			w.fc.Advance(30 * time.Second)
		}
		waitFor(t, "done", func() bool { return w.jobs(t, "poll")[0].status == job.StatusDone })
		if r := w.jobs(t, "poll")[0]; r.attempt != 1 {
			t.Fatalf("a job with max_attempts 1 finished after attempt %d", r.attempt)
		}
	})
}
