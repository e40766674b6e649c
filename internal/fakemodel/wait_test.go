package fakemodel_test

import (
	"context"
	"testing"
	"time"
)

// hangGuard bounds every wait of these tests. It is generous, so that only
// a hang (a bug) reaches it, also on a loaded machine: it is not a speed
// claim (the times of the sessions are only logged).
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
		time.Sleep(10 * time.Millisecond)
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

// guarded is a context that ends after hangGuard.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
