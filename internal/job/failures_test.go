package job_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// lease is the claims' lease in the tests below.
const lease = time.Minute

// scripted registers a handler of kind that does, on its nth call, what
// script[n-1] says: "hang" until its context ends (a holder that vanished:
// its claim's lease runs out), "fail", or succeed ("ok"). Each call sends
// the job as it saw it on the returned channel first.
func scripted(t *testing.T, w *world, kind string, script ...string) (<-chan job.Job, *atomic.Int32) {
	t.Helper()
	calls := &atomic.Int32{}
	seen := make(chan job.Job, len(script)+1)
	w.o.Handle(kind, func(ctx context.Context, j *job.Job) error {
		n := int(calls.Add(1))
		seen <- *j
		if n > len(script) {
			t.Errorf("%s ran a %dth time: its script has %d steps", kind, n, len(script))
			return nil
		}
		switch script[n-1] {
		case "hang":
			<-ctx.Done() // the test's end
			return ctx.Err()
		case "fail":
			return fmt.Errorf("forge down (call %d)", n)
		}
		return nil
	})
	return seen, calls
}

// expire waits for the next call of a hanging handler and lets its lease
// run out, so that the orchestrator claims the job again.
func (w *world) expire(t *testing.T, seen <-chan job.Job, want string) job.Job {
	t.Helper()
	j := hang.Recv(t, seen, want)
	w.advance(lease + time.Millisecond)
	return j
}

// dueAfter waits until the job of kind is pending with the given failures
// in a row after call n, and returns how long until it is due.
func (w *world) dueAfter(t *testing.T, kind string, calls *atomic.Int32, n int32, failures int) time.Duration {
	t.Helper()
	hang.WaitFor(t, fmt.Sprintf("%s pending after call %d", kind, n), func() bool {
		r := w.jobs(t, kind)[0]
		return calls.Load() == n && r.status == job.StatusPending && r.failures == failures && r.runAt.After(w.fc.Now())
	})
	r := w.jobs(t, kind)[0]
	if r.expiries != 0 || r.attempt != int(n) {
		t.Fatalf("%s after call %d: %+v; want attempt %d and no expiries (a result resets them)", kind, n, r, n)
	}
	return r.runAt.Sub(w.fc.Now())
}

// TestLeaseExpiriesCostNoBackoff: claims lost to restarts (leases that ran
// out) count as expiries, not as failures: the first failure after five of
// them is retried after 2 s — not 2^6 s, as the sixth claim's attempt
// would have it — and a job of max_attempts 3 is not dead for it.
func TestLeaseExpiriesCostNoBackoff(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{Lease: lease, BackoffCap: time.Hour})
		seen, calls := scripted(t, w, "check", "hang", "hang", "hang", "hang", "hang", "fail", "ok")
		w.run(t, w.o)
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "check", MaxAttempts: 3})
		for i := 1; i <= 5; i++ {
			j := w.expire(t, seen, fmt.Sprintf("claim %d", i))
			if j.Attempt != i || j.Failures != 0 {
				t.Fatalf("claim %d ran as attempt %d after %d failures, want attempt %d after none", i, j.Attempt, j.Failures, i)
			}
		}
		if j := hang.Recv(t, seen, "the sixth claim"); j.Attempt != 6 || j.Failures != 0 || j.LastTry() {
			t.Fatalf("the sixth claim: attempt %d, %d failures, last try %v; want 6, 0, false", j.Attempt, j.Failures, j.LastTry())
		}
		if d := w.dueAfter(t, "check", calls, 6, 1); d != 2*time.Second {
			t.Fatalf("the first failure after 5 lost claims is retried in %v, want 2s", d)
		}
		w.advance(2 * time.Second)
		hang.WaitFor(t, "done", func() bool { return w.jobs(t, "check")[0].status == job.StatusDone })
		if r := w.jobs(t, "check")[0]; r.attempt != 7 || r.failures != 0 || r.expiries != 0 {
			t.Fatalf("done: %+v; want attempt 7, failures and expiries reset by the success", r)
		}
	})
}

// TestPoisonPillIsDeadAfterExpiriesInARow: a job whose holder vanishes on
// every claim is dead at job.ExpiryLimit(max_attempts) lost claims in a
// row — 4 for max_attempts 2 — without running again; a result in between
// (here a failure) starts the count again.
func TestPoisonPillIsDeadAfterExpiriesInARow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{Lease: lease, BackoffCap: time.Hour})
		seen, calls := scripted(t, w, "crash", "hang", "hang", "fail", "hang", "hang", "hang", "hang")
		w.run(t, w.o)
		w.settle(t)
		w.enqueue(t, job.Spec{Kind: "crash", MaxAttempts: 2})
		if job.ExpiryLimit(2) != 4 {
			t.Fatalf("ExpiryLimit(2) = %d, want 4", job.ExpiryLimit(2))
		}
		w.expire(t, seen, "claim 1")
		w.expire(t, seen, "claim 2")
		if j := hang.Recv(t, seen, "claim 3"); j.Failures != 0 || j.LastTry() {
			t.Fatalf("claim 3: %d failures, last try %v; want 0, false", j.Failures, j.LastTry())
		}
		if d := w.dueAfter(t, "crash", calls, 3, 1); d != 2*time.Second {
			t.Fatalf("the failure after 2 lost claims is retried in %v, want 2s", d)
		}
		w.advance(2 * time.Second)
		for i := 4; i <= 7; i++ {
			j := w.expire(t, seen, fmt.Sprintf("claim %d", i))
			if j.Failures != 1 || !j.LastTry() {
				t.Fatalf("claim %d: %d failures, last try %v; want 1, true", i, j.Failures, j.LastTry())
			}
		}
		hang.WaitFor(t, "dead", func() bool { return w.jobs(t, "crash")[0].status == job.StatusDead })
		r := w.jobs(t, "crash")[0]
		want := row{status: job.StatusDead, attempt: 7, failures: 1, expiries: 4, runAt: r.runAt,
			lastError: "lease expired 4 times in a row (the limit for 2 attempts), the last during attempt 7"}
		if r != want {
			t.Fatalf("dead job:\n got %+v\nwant %+v", r, want)
		}
		if n := calls.Load(); n != 7 {
			t.Fatalf("the handler ran %d times, want 7", n)
		}
	})
}

// TestLastTryFollowsFailures: a handler learns from LastTry that its
// failure would make the job dead — MaxAttempts failures in a row,
// whatever its attempt (claims lost to restarts do not count).
func TestLastTryFollowsFailures(t *testing.T) {
	for _, c := range []struct {
		j    job.Job
		want bool
	}{
		{job.Job{Attempt: 1, Failures: 0, MaxAttempts: 1}, true},
		{job.Job{Attempt: 9, Failures: 0, MaxAttempts: 3}, false},
		{job.Job{Attempt: 9, Failures: 2, MaxAttempts: 3}, true},
		{job.Job{Attempt: 3, Failures: 1, MaxAttempts: 3}, false},
	} {
		if got := c.j.LastTry(); got != c.want {
			t.Errorf("%+v: LastTry %v, want %v", c.j, got, c.want)
		}
	}
}
