package apitest

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

// HangGuard bounds how long a test waits for something that must happen (a
// flow to reach a state, a run to be leased, a loop to go to sleep), so
// that a failing test ends with a message instead of hanging until the
// suite's timeout. It is not a speed claim: a passing run never comes near
// it, however loaded the machine. Speed is measured by benchmarks.
const HangGuard = 2 * time.Minute

// Await polls cond until it holds, failing the test with what after
// HangGuard.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(HangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", HangGuard, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BlockUntil waits until fk has n pending timers (the loops under test have
// gone to sleep on it), failing the test after HangGuard.
func BlockUntil(t testing.TB, fk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() { fk.BlockUntil(n); close(done) }()
	select {
	case <-done:
	case <-time.After(HangGuard):
		t.Fatalf("%d timers pending on the fake clock after %v, want %d", fk.Waiters(), HangGuard, n)
	}
}

// Receive returns the next value from ch (the zero value once it is
// closed), failing the test with what after HangGuard.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(HangGuard):
		t.Fatalf("gave up after %v waiting for %s", HangGuard, what)
		var zero T
		return zero
	}
}
