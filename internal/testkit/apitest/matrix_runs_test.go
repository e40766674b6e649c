package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Run routes. The runner protocol takes only runner tokens (/runners…, and
// a run's heartbeat, log, usage and finish) and the run's own run token
// (its session's skills, report and questions). Every matrix role is an API
// token or the bootstrap admin, so each gets 403 there — a platform admin
// included: acting as a runner needs a runner token — and no credential
// 401. Runner and run tokens themselves are tested in runs_test.go. Reading
// runs is tracker.read on the run's project.
var runnerOnly = map[string]int{None: 401, Other: 403, Viewer: 403, Member: 403, Admin: 403, Platform: 403}

// matrixRun queues a run on a new ACME task and returns its id.
func matrixRun(w *World) string {
	return queueRun(w.Env, matrixItem(w)).ID
}

// matrixRunner registers a runner with a new runner token and returns its
// id.
func matrixRunner(w *World) string {
	return registerRunner(w.Env, runnerToken(w.Env, fmt.Sprintf("matrix-runner-%d", w.Unique())), "matrix")
}

func init() {
	Register("POST /api/v1/runners", Case{Prepare: fixed("/api/v1/runners", map[string]any{"name": "matrix"}), Want: runnerOnly})
	Register("POST /api/v1/runners/{runner}/lease", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runners/" + matrixRunner(w) + "/lease", map[string]any{} },
		Want:    runnerOnly,
	})
	Register("POST /api/v1/runners/{runner}/heartbeat", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runners/" + matrixRunner(w) + "/heartbeat", nil },
		Want:    runnerOnly,
	})
	Register("POST /api/v1/runs/{run}/heartbeat", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runs/" + matrixRun(w) + "/heartbeat", nil },
		Want:    runnerOnly,
	})
	Register("GET /api/v1/runs/{run}/skills", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runs/" + matrixRun(w) + "/skills", nil },
		Want:    runnerOnly,
	})
	Register("POST /api/v1/runs/{run}/report", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/runs/" + matrixRun(w) + "/report", map[string]any{"outcome": "done", "summary": "Done."}
		},
		Want: runnerOnly,
	})
	Register("POST /api/v1/runs/{run}/questions", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/runs/" + matrixRun(w) + "/questions", map[string]any{"text": "Which?", "blocking": true}
		},
		Want: runnerOnly,
	})
	Register("POST /api/v1/runs/{run}/finish", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/runs/" + matrixRun(w) + "/finish", map[string]any{"exit_status": 0}
		},
		Want: runnerOnly,
	})
	Register("POST /api/v1/runs/{run}/usage", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/runs/" + matrixRun(w) + "/usage", map[string]any{"input_tokens": 1}
		},
		Want: runnerOnly,
	})
	Register("POST /api/v1/runs/{run}/log", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runs/" + matrixRun(w) + "/log?offset=0", "output" },
		Want:    runnerOnly,
	})
	Register("GET /api/v1/runs/{run}/log", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runs/" + matrixRun(w) + "/log", nil },
		Want:    ReadOK(200),
	})
	Register("GET /api/v1/runs/{run}/transcript", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runs/" + matrixRun(w) + "/transcript", nil },
		Want:    ReadOK(200),
	})
	// MCP takes run tokens only: any other credential is a 401, as MCP
	// clients expect (mcp_test.go tests run tokens).
	Register("POST /api/v1/mcp", Case{
		Prepare: fixed("/api/v1/mcp", initialize),
		Want:    map[string]int{None: 401, Other: 401, Viewer: 401, Member: 401, Admin: 401, Platform: 401},
	})
	Register("GET /api/v1/runs/{run}", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runs/" + matrixRun(w), nil },
		Want:    ReadOK(200),
	})
	Register("GET /api/v1/items/{item}/runs", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w) + "/runs", nil },
		Want:    ReadOK(200),
	})
}

// GET /api/v1/runners: platform admins and organization admins
// (project.update in an organization: the admin of another organization
// too, who sees the runners but none of ACME's sessions, TestListRunners);
// runner and run tokens 403.
func init() {
	Register("GET /api/v1/runners", Case{
		Prepare: func(w *World) (string, any) { matrixRunner(w); return "/api/v1/runners", nil },
		Want:    map[string]int{None: 401, Other: 200, Viewer: 403, Member: 403, Admin: 200, Platform: 200},
		// A project member with no organization role is no organization
		// admin anywhere.
		Override: map[string]int{"ACME-only member": 403, "token of ACME-only member": 403},
	})
}

// Draining a runner and undraining it: platform admins only (an
// organization admin lists the runners but does not run them).
func init() {
	Register("POST /api/v1/runners/{runner}/drain", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runners/" + matrixRunner(w) + "/drain", nil },
		Want:    PlatformOK(200),
	})
	Register("POST /api/v1/runners/{runner}/undrain", Case{
		Prepare: func(w *World) (string, any) {
			id := matrixRunner(w)
			w.Admin(200, "POST", "/api/v1/runners/"+id+"/drain", nil)
			return "/api/v1/runners/" + id + "/undrain", nil
		},
		Want: PlatformOK(200),
	})
}
