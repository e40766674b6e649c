package job_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// claim marks the jobs of a kind as claimed by owner, attempt attempt, with
// expiries lost claims in a row before it and a lease of the default 5
// minutes from now on the fake clock (as a process that was killed while
// their handlers ran left them).
func (w *world) claim(t *testing.T, kind, owner string, attempt, expiries int) {
	t.Helper()
	now := w.fc.Now()
	if _, err := w.s.Exec(context.Background(), store.Stmt(`UPDATE jobs SET status = 'running', attempt = ?, expiries = ?, claimed_by = ?, lease_until = ?
WHERE kind = ?`, attempt, expiries, owner, now.Add(5*time.Minute).UnixMilli(), kind)); err != nil {
		t.Fatal(err)
	}
}

// TestTakeBackRunsOrphanedClaimsAtOnce: claims left by an instance that is
// gone are taken back at start and run again at once — long before their
// lease could have run out (the fake clock does not move) — with the
// accounting of an expired lease: the interrupted claim counts as an
// expiry, and a job at its expiry limit is dead.
func TestTakeBackRunsOrphanedClaimsAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		var attempts atomic.Int32
		w.o.Handle("orphan", func(_ context.Context, j *job.Job) error { attempts.Store(int32(j.Attempt)); return nil })
		w.o.Handle("last", func(context.Context, *job.Job) error { t.Error("a job at its expiry limit ran again"); return nil })
		w.enqueue(t, job.Spec{Kind: "orphan"}, job.Spec{Kind: "last", MaxAttempts: 3}, job.Spec{Kind: "later", RunAt: w.fc.Now().Add(time.Hour)})
		w.claim(t, "orphan", "gone-1", 1, 0)
		w.claim(t, "last", "gone-1", 9, job.ExpiryLimit(3)-1)

		n, err := w.o.TakeBack(context.Background())
		if err != nil || n != 2 {
			t.Fatalf("took back %d claims (%v), want 2", n, err)
		}
		w.run(t, w.o)
		hang.WaitFor(t, "the orphaned job ran again", func() bool { return w.jobs(t, "orphan")[0].status == job.StatusDone })
		if a := attempts.Load(); a != 2 {
			t.Fatalf("the orphaned job ran as attempt %d, want 2", a)
		}
		if r := w.jobs(t, "orphan")[0]; r.failures != 0 || r.expiries != 0 {
			t.Fatalf("the orphaned job, done: %+v; want no failures, no expiries", r)
		}
		hang.WaitFor(t, "the job at its expiry limit is dead", func() bool { return w.jobs(t, "last")[0].status == job.StatusDead })
		if r := w.jobs(t, "last")[0]; r.attempt != 9 || r.expiries != 6 || r.failures != 0 ||
			r.lastError != "lease expired 6 times in a row (the limit for 3 attempts), the last during attempt 9" {
			t.Fatalf("job at its expiry limit: %+v", r)
		}
		if r := w.jobs(t, "later")[0]; r.status != job.StatusPending || r.attempt != 0 {
			t.Fatalf("a pending job was touched: %+v", r)
		}
		if !w.fc.Now().Equal(start) {
			t.Fatal("the clock moved: the lease could have run out")
		}
	})
}

// TestAbandonLeavesClaimsForTheNextLeader: a leader that lost its lease
// abandons its handlers at once (no shutdown grace), records nothing for
// them, and the next leader takes their claims back and runs them at once.
func TestAbandonLeavesClaimsForTheNextLeader(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{ShutdownGrace: time.Hour})
		var cancelled atomic.Bool
		w.o.Handle("long", func(ctx context.Context, j *job.Job) error {
			<-ctx.Done()
			cancelled.Store(true)
			return ctx.Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { w.o.Run(ctx); close(stopped) }()
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "long"})
		hang.WaitFor(t, "running", func() bool { return w.o.Running() == 1 })

		cancel()
		w.o.Abandon() // within the hour of grace: only Abandon can stop it
		hang.Recv(t, stopped, "Run returned")
		if !cancelled.Load() {
			t.Fatal("the handler was not cancelled")
		}
		if r := w.jobs(t, "long")[0]; r.status != job.StatusRunning || r.attempt != 1 || r.lastError != "" {
			t.Fatalf("abandoned job: %+v, want its claim left as it was", r)
		}

		next := job.NewOrchestrator(s, w.fc, slog.New(slog.NewTextHandler(io.Discard, nil)), job.Config{Poll: time.Second}, "test-2", nil)
		var ran atomic.Int32
		next.Handle("long", func(_ context.Context, j *job.Job) error { ran.Store(int32(j.Attempt)); return nil })
		if n, err := next.TakeBack(context.Background()); err != nil || n != 1 {
			t.Fatalf("took back %d claims (%v), want 1", n, err)
		}
		w.run(t, next)
		hang.WaitFor(t, "the next leader ran it", func() bool { return w.jobs(t, "long")[0].status == job.StatusDone })
		if ran.Load() != 2 {
			t.Fatalf("ran as attempt %d, want 2", ran.Load())
		}
	})
}
