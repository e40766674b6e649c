// Package hang holds the tests' hang guards: waits that fail the test
// when they last longer than Guard instead of hanging until the suite's
// timeout. Guard is generous on purpose — only a hang (a bug) reaches it,
// also on a loaded machine; it is not a speed claim (speed lives in the
// benchmarks).
package hang

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

// Guard bounds every guarded wait.
const Guard = 2 * time.Minute

// poll is how often WaitFor checks its condition.
const poll = 2 * time.Millisecond

// WaitFor polls cond (the database, a counter) until it holds; it fails
// the test when Guard passes first. A fake clock does not move while it
// waits.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("hang guard: still waiting for %s after %v", what, Guard)
		}
		time.Sleep(poll)
	}
}

// Recv receives from ch; it fails the test when Guard passes first.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Guard):
		t.Fatalf("hang guard: still waiting for %s after %v", what, Guard)
		panic("unreachable")
	}
}

// Send sends v on ch; it fails the test when Guard passes first.
func Send[T any](t testing.TB, ch chan<- T, v T, what string) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(Guard):
		t.Fatalf("hang guard: still waiting for %s after %v", what, Guard)
	}
}

// BlockUntil waits until n timers of fc are pending; it fails the test when
// Guard passes first.
func BlockUntil(t testing.TB, fc *clock.Fake, n int, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { fc.BlockUntil(n); close(done) }()
	Recv(t, done, what)
}

// Context is a context that ends after Guard (and with the test).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Guard)
	t.Cleanup(cancel)
	return ctx
}
