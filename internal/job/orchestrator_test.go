package job_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
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
	a := &transition.Applier{Store: s, Clock: fc}
	a.Subscribe(transition.WakeOnJobs(o.Notify))
	return &world{s: s, fc: fc, o: o, a: a}
}

// run starts o, and stops it when the test ends.
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
	hang.WaitFor(t, "orchestrator stopped", func() bool {
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
	status             string
	attempt            int
	failures, expiries int
	runAt              time.Time
	lastError          string
}

func (w *world) jobs(t *testing.T, kind string) []row {
	t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT status, attempt, failures, expiries, run_at, COALESCE(last_error, '') FROM jobs WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]row, rows.Len())
	for i := range out {
		var at int64
		if err := rows.Scan(i, &out[i].status, &out[i].attempt, &out[i].failures, &out[i].expiries, &at, &out[i].lastError); err != nil {
			t.Fatal(err)
		}
		out[i].runAt = time.UnixMilli(at).UTC()
	}
	return out
}

// advance moves the fake clock on by d and wakes the orchestrator, so that
// a pass starts after the move: a loop caught between its pass and its
// sleep would otherwise sleep on a timer computed from the new time (the
// 5 ms floor for a job now due), which a fake clock never reaches.
func (w *world) advance(d time.Duration) {
	w.fc.Advance(d)
	w.o.Notify()
}

// settle waits until the orchestrator's loop sleeps on its poll timer again.
func (w *world) settle(t *testing.T) {
	t.Helper()
	hang.BlockUntil(t, w.fc, 1, "the orchestrator polling")
}

func TestWakesAtOnceOnEnqueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		var ran atomic.Int32
		w.o.Handle("k", func(context.Context, *job.Job) error { ran.Add(1); return nil })
		w.run(t, w.o)
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "k"})
		// The fake clock never moves: only the in-process wake can start it.
		hang.WaitFor(t, "job done", func() bool { r := w.jobs(t, "k"); return len(r) == 1 && r[0].status == job.StatusDone })
		if ran.Load() != 1 {
			t.Fatalf("handler ran %d times", ran.Load())
		}
	})
}

func TestBackoffScheduleThenDead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{BackoffCap: 10 * time.Second})
		w.o.Handle("fail", func(_ context.Context, j *job.Job) error { return fmt.Errorf("boom %d", j.Attempt) })
		w.o.Handle("mark", func(context.Context, *job.Job) error { return nil })
		w.run(t, w.o)
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "fail", MaxAttempts: 5})
		wantDelays := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second}
		for i, d := range wantDelays {
			attempt := i + 1
			hang.WaitFor(t, fmt.Sprintf("attempt %d failed", attempt), func() bool {
				r := w.jobs(t, "fail")
				return r[0].status == job.StatusPending && r[0].attempt == attempt
			})
			r := w.jobs(t, "fail")[0]
			if r.failures != attempt || r.expiries != 0 {
				t.Fatalf("after attempt %d: %d failures, %d expiries; want %d and 0", attempt, r.failures, r.expiries, attempt)
			}
			if got := r.runAt.Sub(w.fc.Now()); got != d {
				t.Fatalf("after attempt %d the job is due in %v, want %v", attempt, got, d)
			}
			if r.lastError != fmt.Sprintf("boom %d", attempt) {
				t.Fatalf("last error %q", r.lastError)
			}
			// Just before it is due, nothing runs: a marker job enqueued
			// then is claimed by a pass that saw the failed job too.
			w.fc.Advance(d - 10*time.Millisecond)
			w.enqueue(t, job.Spec{Kind: "mark"})
			hang.WaitFor(t, "the marker done", func() bool {
				for _, r := range w.jobs(t, "mark") {
					if r.status != job.StatusDone {
						return false
					}
				}
				return true
			})
			if r := w.jobs(t, "fail")[0]; r.attempt != attempt || r.status != job.StatusPending {
				t.Fatalf("attempt %d ran early (status %s attempt %d)", attempt+1, r.status, r.attempt)
			}
			w.advance(10 * time.Millisecond)
		}
		hang.WaitFor(t, "dead", func() bool { return w.jobs(t, "fail")[0].status == job.StatusDead })
		if r := w.jobs(t, "fail")[0]; r.attempt != 5 || r.failures != 5 || r.lastError != "boom 5" {
			t.Fatalf("dead job: attempt %d, %d failures, last error %q; want 5, 5 (max_attempts) and boom 5", r.attempt, r.failures, r.lastError)
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
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "perm"}, job.Spec{Kind: "orphan"}, job.Spec{Kind: "panics"})
		for kind, msg := range map[string]string{
			"perm":   "permanent: bad input",
			"orphan": `permanent: no handler for job kind "orphan"`,
			"panics": "permanent: handler panicked: oops",
		} {
			hang.WaitFor(t, kind+" dead", func() bool { return w.jobs(t, kind)[0].status == job.StatusDead })
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
		w.o.Handle("block", func(ctx context.Context, _ *job.Job) error {
			n := now.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			defer now.Add(-1)
			select {
			case <-release:
				return nil
			case <-ctx.Done(): // the test failed and stops
				return ctx.Err()
			}
		})
		w.run(t, w.o)
		w.settle(t)
		specs := make([]job.Spec, 20)
		for i := range specs {
			specs[i] = job.Spec{Kind: "block"}
		}
		w.enqueue(t, specs...)
		hang.WaitFor(t, "8 running", func() bool { return now.Load() == 8 })
		w.settle(t)
		w.fc.Advance(time.Second) // a poll pass while full claims nothing
		w.settle(t)
		if n := now.Load(); n != 8 {
			t.Fatalf("%d handlers run at once, want 8", n)
		}
		close(release) // freed slots are refilled at once, without a poll
		hang.WaitFor(t, "all done", func() bool {
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
// past its lease and a second orchestrator re-claims the job. While the
// second attempt still runs — so that only the finish's attempt condition
// can stop it, not the job's status — the first holder finishes late, with
// each result a handler can have: its finish must leave the row exactly as
// the second claim wrote it (and count as lost). Then the second attempt
// finishes and the job is done.
func TestExpiredLeaseIsReclaimedAndLateFinisherLoses(t *testing.T) {
	results := map[string]error{
		"done":   nil,
		"retry":  errors.New("late failure that must be discarded"),
		"dead":   job.Permanent(errors.New("late permanent failure that must be discarded")),
		"snooze": job.Snooze(time.Hour),
	}
	for name, late := range results {
		t.Run("late "+name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, s store.Store) {
				w := setup(t, s, job.Config{})
				reg := prometheus.NewRegistry()
				// o1 has one slot, which its hanging handler fills: the
				// re-claim can only be o2's.
				cfg := job.Config{Lease: time.Minute, Poll: time.Second, Concurrency: 1}
				o1 := job.NewOrchestrator(s, w.fc, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, "test-1", job.NewMetrics(reg))
				cfg.Concurrency = 0
				o2 := job.NewOrchestrator(s, w.fc, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, "test-2", nil)
				unblock, hold := make(chan struct{}), make(chan struct{})
				firstRuns, secondRuns := make(chan struct{}, 1), make(chan struct{}, 1)
				o1.Handle("slow", func(ctx context.Context, j *job.Job) error {
					if j.Attempt != 1 {
						t.Errorf("o1 ran attempt %d", j.Attempt)
						return nil
					}
					firstRuns <- struct{}{}
					select {
					case <-unblock:
						return late
					case <-ctx.Done(): // the test failed and stops
						return ctx.Err()
					}
				})
				o2.Handle("slow", func(ctx context.Context, j *job.Job) error {
					if j.Attempt != 2 {
						t.Errorf("o2 ran attempt %d", j.Attempt)
						return nil
					}
					secondRuns <- struct{}{}
					select {
					case <-hold:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				w.run(t, o1)
				w.settle(t)
				w.enqueue(t, job.Spec{Kind: "slow"})
				o1.Notify()
				hang.Recv(t, firstRuns, "the first claim")

				w.run(t, o2)
				hang.BlockUntil(t, w.fc, 2, "both orchestrators polling")
				w.fc.Advance(59 * time.Second)
				hang.BlockUntil(t, w.fc, 2, "both orchestrators polling after 59 s")
				if r := w.jobs(t, "slow")[0]; r.attempt != 1 {
					t.Fatalf("re-claimed before the lease ran out: attempt %d", r.attempt)
				}
				w.fc.Advance(time.Second + time.Millisecond)
				hang.Recv(t, secondRuns, "the re-claim")
				claimed := w.claimOf(t, "slow")
				if claimed.status != job.StatusRunning || claimed.attempt != 2 || claimed.claimedBy != "test-2" {
					t.Fatalf("re-claimed job: %+v", claimed)
				}

				close(unblock) // the first holder finishes late, while the second still runs
				hang.WaitFor(t, "the late finisher returned", func() bool { return o1.Running() == 0 })
				if got := w.claimOf(t, "slow"); got != claimed {
					t.Fatalf("the late finisher (%s) overwrote the running second attempt:\n got %+v\nwant %+v", name, got, claimed)
				}
				if n := counted(t, reg, "slow", "lost"); n != 1 {
					t.Fatalf("%v late results counted as lost, want 1", n)
				}

				close(hold)
				hang.WaitFor(t, "the second attempt done", func() bool { return o2.Running() == 0 })
				if r := w.jobs(t, "slow")[0]; r.status != job.StatusDone || r.attempt != 2 || r.lastError != "" {
					t.Fatalf("after the second attempt: %+v", r)
				}
			})
		})
	}
}

// heldClaim holds the first claim batch an orchestrator sends (after it
// read the due jobs) until the test releases it.
type heldClaim struct {
	store.Store
	once             sync.Once
	arrived, release chan struct{}
}

func (h *heldClaim) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	if len(batch) > 0 && strings.Contains(batch[0].SQL, "SET status = 'running'") {
		h.once.Do(func() {
			close(h.arrived)
			<-h.release
		})
	}
	return h.Store.Exec(ctx, batch...)
}

// TestStaleClaimLoses: an orchestrator that read a pending job, but whose
// claim arrives after another one claimed and ran it (and it failed, so
// that it is pending again with the next attempt), claims nothing: the
// claim is guarded by the attempt it read, not only by the status.
func TestStaleClaimLoses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		held := &heldClaim{Store: s, arrived: make(chan struct{}), release: make(chan struct{})}
		slow := job.NewOrchestrator(held, w.fc, slog.New(slog.NewTextHandler(io.Discard, nil)), job.Config{Poll: time.Second}, "slow", nil)
		var stale atomic.Int32
		slow.Handle("k", func(context.Context, *job.Job) error { stale.Add(1); return nil })
		w.o.Handle("k", func(context.Context, *job.Job) error { return errors.New("fails once") })
		w.enqueue(t, job.Spec{Kind: "k"})
		w.run(t, slow)
		hang.Recv(t, held.arrived, "the slow claim")
		w.run(t, w.o)
		hang.WaitFor(t, "the job ran and failed", func() bool {
			r := w.jobs(t, "k")[0]
			return r.status == job.StatusPending && r.attempt == 1
		})
		before := w.claimOf(t, "k")
		close(held.release)
		// Both loops sleep once the slow claim has been answered.
		hang.BlockUntil(t, w.fc, 2, "both orchestrators polling")
		if n := stale.Load(); n != 0 {
			t.Fatalf("the stale claim ran the job %d times", n)
		}
		if got := w.claimOf(t, "k"); got != before {
			t.Fatalf("the stale claim changed the job:\n got %+v\nwant %+v", got, before)
		}
	})
}

// claimRow is every column of a job's row that a finish may write.
type claimRow struct {
	status, claimedBy, lastError string
	attempt                      int
	runAt, leaseUntil, finished  int64
	updatedAt                    int64
}

func (w *world) claimOf(t *testing.T, kind string) claimRow {
	t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT status, COALESCE(claimed_by, ''), COALESCE(last_error, ''), attempt, run_at,
    COALESCE(lease_until, -1), COALESCE(finished_at, -1), updated_at FROM jobs WHERE kind = ?`, kind)
	if err != nil || rows.Len() != 1 {
		t.Fatalf("read job %s: %v", kind, err)
	}
	var r claimRow
	if err := rows.Scan(0, &r.status, &r.claimedBy, &r.lastError, &r.attempt, &r.runAt, &r.leaseUntil, &r.finished, &r.updatedAt); err != nil {
		t.Fatal(err)
	}
	return r
}

// counted returns ballet_jobs_total{kind, result} from reg.
func counted(t *testing.T, reg *prometheus.Registry, kind, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ballet_jobs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestDedupeKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		release := make(chan struct{})
		w.o.Handle("d", func(ctx context.Context, _ *job.Job) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done(): // the test failed and stops
				return ctx.Err()
			}
		})
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"})
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"}) // pending: no-op
		if n := len(w.jobs(t, "d")); n != 1 {
			t.Fatalf("%d jobs after a duplicate enqueue of a pending key", n)
		}
		w.run(t, w.o)
		hang.WaitFor(t, "running", func() bool { return w.jobs(t, "d")[0].status == job.StatusRunning })
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"}) // running: no-op
		if n := len(w.jobs(t, "d")); n != 1 {
			t.Fatalf("%d jobs after a duplicate enqueue of a running key", n)
		}
		close(release)
		hang.WaitFor(t, "done", func() bool { return w.jobs(t, "d")[0].status == job.StatusDone })
		w.enqueue(t, job.Spec{Kind: "d", DedupeKey: "check:PR-1"}) // finished: the key is free again
		hang.WaitFor(t, "second job done", func() bool {
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
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "slow"})
		hang.WaitFor(t, "running", func() bool { return w.o.Running() == 1 })
		cancel()
		close(release)
		hang.Recv(t, stopped, "Run returned")
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
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "stuck"})
		hang.WaitFor(t, "stuck running", func() bool { return w.o.Running() == 1 })
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

// A wake that comes while the job runs is not lost: the handler's snooze
// then makes it due at once (a forge webhook arriving while the merge check
// it asks for is under way), and a wake of a job that is not running makes
// it due at once too.
func TestWakeWhileRunningIsNotLost(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		var calls atomic.Int32
		entered, release := make(chan struct{}, 4), make(chan struct{})
		w.o.Handle("poll", func(context.Context, *job.Job) error {
			calls.Add(1)
			entered <- struct{}{}
			<-release
			return job.Snooze(time.Hour)
		})
		w.run(t, w.o)
		var once sync.Once
		releaseAll := func() { once.Do(func() { close(release) }) }
		t.Cleanup(releaseAll) // before the orchestrator's stop is awaited
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "poll", DedupeKey: "poll:1"})
		hang.Recv(t, entered, "the first check")
		n, err := w.o.Wake(context.Background(), "poll:1")
		if err != nil || n != 1 {
			t.Fatalf("Wake of a running job: %d, %v; want 1 woken", n, err)
		}
		release <- struct{}{}
		// The snooze of the woken check leaves it due now: it runs again
		// without the clock moving.
		hang.Recv(t, entered, "the check the wake asked for")
		release <- struct{}{}
		hang.WaitFor(t, "snoozed for an hour", func() bool {
			r := w.jobs(t, "poll")[0]
			return calls.Load() == 2 && r.status == job.StatusPending && r.runAt.Sub(w.fc.Now()) == time.Hour
		})
		// Not running: a wake makes it due at once.
		if n, err := w.o.Wake(context.Background(), "poll:1"); err != nil || n != 1 {
			t.Fatalf("Wake of a snoozed job: %d, %v; want 1 woken", n, err)
		}
		hang.Recv(t, entered, "the check after the second wake")
		releaseAll()
	})
}

// A snooze is a success: the failures before it are forgotten, so a job
// that polls for long (a merge check) is not slowed down, or killed, by
// failures that each recovered.
func TestSnoozeForgetsTheFailuresBeforeIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{BackoffCap: time.Hour})
		var calls atomic.Int32
		w.o.Handle("poll", func(context.Context, *job.Job) error {
			switch calls.Add(1) {
			case 1, 2, 4:
				return errors.New("forge down")
			case 3:
				return job.Snooze(30 * time.Second)
			}
			return nil
		})
		w.run(t, w.o)
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "poll", MaxAttempts: 3})
		// The attempt, the claims' fencing token, goes on; the failures
		// in a row start again.
		due := func(what string, n int32, failures int, in time.Duration) {
			t.Helper()
			hang.WaitFor(t, what, func() bool {
				r := w.jobs(t, "poll")[0]
				return calls.Load() == n && r.status == job.StatusPending && r.attempt == int(n) && r.failures == failures &&
					r.runAt.After(w.fc.Now())
			})
			if got := w.jobs(t, "poll")[0].runAt.Sub(w.fc.Now()); got != in {
				t.Fatalf("%s: due in %v, want %v", what, got, in)
			}
			w.advance(in)
		}
		due("the first failure", 1, 1, 2*time.Second)
		due("the second failure", 2, 2, 4*time.Second)
		due("the snooze", 3, 0, 30*time.Second)
		// Without the reset this third failure in the job's life would be
		// its last (max_attempts 3): it is the first since the snooze.
		due("the failure after the snooze", 4, 1, 2*time.Second)
		hang.WaitFor(t, "done", func() bool { return w.jobs(t, "poll")[0].status == job.StatusDone })
		if r := w.jobs(t, "poll")[0]; r.attempt != 5 || r.failures != 0 {
			t.Fatalf("done: attempt %d, %d failures; want 5 and 0 (a success resets them)", r.attempt, r.failures)
		}
	})
}

func TestSnoozeRunsLaterWithoutCountingAFailure(t *testing.T) {
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
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "poll", MaxAttempts: 1})
		for i := 1; i <= 3; i++ {
			hang.WaitFor(t, "snoozed", func() bool {
				r := w.jobs(t, "poll")[0]
				// runAt after now: this snooze's row, not a stale read of
				// the previous one (rqlite's reads may lag the claim).
				return calls.Load() == int32(i) && r.status == job.StatusPending && r.attempt == i && r.failures == 0 && r.runAt.After(w.fc.Now())
			})
			if r := w.jobs(t, "poll")[0]; r.runAt.Sub(w.fc.Now()) != 30*time.Second {
				t.Fatalf("snoozed until %v", r.runAt.Sub(w.fc.Now()))
			}
			w.advance(30 * time.Second)
		}
		hang.WaitFor(t, "done", func() bool { return w.jobs(t, "poll")[0].status == job.StatusDone })
		if r := w.jobs(t, "poll")[0]; r.attempt != 4 || r.failures != 0 {
			t.Fatalf("a job with max_attempts 1 finished as attempt %d with %d failures, want 4 and 0", r.attempt, r.failures)
		}
	})
}
