package uitest

import (
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// Start runs a whole Core (as `ballet serve`: its HTTP server with the
// embedded UI on 127.0.0.1, the feed and, as the leader, the orchestrator,
// scheduler and reconciler) over a fresh SQLite file, with
// apitest.BootstrapToken as its bootstrap token, until the test ends.
func Start(t testing.TB, adjust ...func(*config.Config)) *apitest.Env {
	t.Helper()
	return apitest.RunOn(t, storetest.Open(t, "sqlite"), nil, adjust...)
}
