package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// readyTicket creates a ready ticket in ACME and returns its key.
func readyTicket(w *World) string {
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "matrix", "state": "ready"}).JSON(w.T, &it)
	return it.Key
}

// startedTicket creates a ticket and starts its flow (the matrix world runs
// no jobs, so the flow stays before its first stage).
func startedTicket(w *World) string {
	key := readyTicket(w)
	w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
	return key
}

func init() {
	Register("GET /api/v1/items/{item}/flow", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + startedTicket(w) + "/flow", nil },
		Want:    ReadOK(200),
	})
	// The matrix world's repository is not there: a reader gets 503 (the
	// forge cannot be read), which it can only reach past the permission
	// check; another organization's caller 404.
	Register("GET /api/v1/items/{item}/changes", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + readyTicket(w) + "/changes", nil },
		Want:    map[string]int{None: 401, Other: 404, Viewer: 503, Member: 503, Admin: 503, Platform: 503},
	})
	Register("POST /api/v1/items/{item}/flow/start", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + readyTicket(w) + "/flow/start", nil },
		Want:    WriteOK(200),
	})
	// The flow waits for no approval: a caller allowed to decide gets 409,
	// which it can only reach past the permission check.
	notWaiting := map[string]int{None: 401, Other: 404, Viewer: 403, Member: 409, Admin: 409, Platform: 409}
	Register("POST /api/v1/items/{item}/flow/approve", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/items/" + startedTicket(w) + "/flow/approve", map[string]any{}
		},
		Want: notWaiting,
	})
	Register("POST /api/v1/items/{item}/flow/reject", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/items/" + startedTicket(w) + "/flow/reject", map[string]any{"comment": "no"}
		},
		Want: notWaiting,
	})
}
