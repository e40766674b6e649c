// Package sandboxtest gives tests the real bubblewrap sandbox: a machine
// where it cannot make one fails the test under CI=true, with the sandbox's
// own advice on how to fix it, and is a counted skip elsewhere (package
// parts); the tests that need it are also skipped when a developer asks
// with BALLET_SKIP_SANDBOX=1.
package sandboxtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ballet/ballet/internal/testkit/parts"
)

// SkipEnv is the environment variable a developer sets to 1 to skip every
// test that needs the sandbox.
const SkipEnv = "BALLET_SKIP_SANDBOX"

// Need skips the test when BALLET_SKIP_SANDBOX=1 asks for it; when check,
// the sandbox's Check (sandbox.Sandbox{}.Check, passed in so that package's
// own tests can use Need too), says no sandbox can be made here, the test
// fails under CI=true and is a counted skip elsewhere.
func Need(t testing.TB, check func(context.Context) error) {
	t.Helper()
	parts.Asked(t, parts.Bubblewrap, SkipEnv)
	if err := check(context.Background()); err != nil {
		parts.Missing(t, parts.Bubblewrap, fmt.Errorf("sandboxtest: the tests need bubblewrap (.ci/run installs it), or %s=1 to skip them: %w", SkipEnv, err))
	}
}
