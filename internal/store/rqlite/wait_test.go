package rqlite

import (
	"testing"
	"time"
)

// hangGuard bounds every wait of these tests on real processes and
// sockets. It is generous, so that only a hang (a bug) reaches it, also on
// a loaded machine: it is not a speed claim.
const hangGuard = 2 * time.Minute

// waitFor polls cond until it holds; it fails the test when hangGuard
// passes first.
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

// send sends v on ch; it fails the test when hangGuard passes first.
func send[T any](t *testing.T, ch chan<- T, v T, what string) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(hangGuard):
		t.Fatalf("hang guard: still waiting for %s after %v", what, hangGuard)
	}
}
