package leader_test

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

// hangGuard bounds every wait of these tests. It is generous, so that only
// a hang (a bug) reaches it, also on a loaded machine: it is not a speed
// claim.
const hangGuard = 2 * time.Minute

// waitFor polls cond until it holds; it fails the test when hangGuard
// passes first. Time on the fake clock does not move while it waits.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("hang guard: still waiting for %s after %v", what, hangGuard)
		}
		time.Sleep(time.Millisecond)
	}
}

// recv receives from ch; it fails the test when hangGuard passes first.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("hang guard: still waiting for %s after %v", what, hangGuard)
		panic("unreachable")
	}
}

// blockUntil waits until n timers of fc are pending; it fails the test when
// hangGuard passes first.
func blockUntil(t *testing.T, fc *clock.Fake, n int, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { fc.BlockUntil(n); close(done) }()
	recv(t, done, what)
}
