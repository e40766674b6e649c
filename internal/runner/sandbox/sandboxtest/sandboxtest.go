// Package sandboxtest gives tests the real bubblewrap sandbox: a machine
// where it cannot make one fails the test, with the sandbox's own advice on
// how to fix it; the tests that need it are skipped only when a developer
// asks with BALLET_SKIP_SANDBOX=1.
package sandboxtest

import (
	"context"
	"os"
	"testing"
)

// SkipEnv is the environment variable a developer sets to 1 to skip every
// test that needs the sandbox. Nothing else skips them.
const SkipEnv = "BALLET_SKIP_SANDBOX"

// Need skips the test when BALLET_SKIP_SANDBOX=1 asks for it; otherwise it
// fails the test when check, the sandbox's Check (sandbox.Sandbox{}.Check,
// passed in so that package's own tests can use Need too), says no sandbox
// can be made here.
func Need(t testing.TB, check func(context.Context) error) {
	t.Helper()
	switch v := os.Getenv(SkipEnv); v {
	case "1":
		t.Skipf("sandboxtest: %s=1: the tests that need the sandbox are skipped", SkipEnv)
	case "", "0":
	default:
		t.Fatalf("sandboxtest: %s=%q: set it to 1 to skip the tests that need the sandbox, or leave it unset", SkipEnv, v)
	}
	if err := check(context.Background()); err != nil {
		t.Fatalf("sandboxtest: the tests need bubblewrap (.ci/run installs it), or %s=1 to skip them: %v", SkipEnv, err)
	}
}
