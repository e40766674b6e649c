package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Notification routes: a caller's own inbox, for any credential; a
// notification that is not the caller's is not found (this world's
// callers have none, so the id is nobody's).
func init() {
	Register("GET /api/v1/me/digest", Case{Prepare: fixed("/api/v1/me/digest", nil), Want: AnyOK(200)})
	Register("GET /api/v1/me/notifications/inbox", Case{Prepare: fixed("/api/v1/me/notifications/inbox", nil), Want: AnyOK(200)})
	Register("POST /api/v1/me/notifications/inbox/read", Case{Prepare: fixed("/api/v1/me/notifications/inbox/read", nil), Want: AnyOK(200)})
	Register("POST /api/v1/me/notifications/inbox/{id}/read", Case{
		Prepare: fixed("/api/v1/me/notifications/inbox/01a24975-3db3-7c34-b51c-18c88b0af079/read", nil),
		Want:    map[string]int{None: 401, Other: 404, Viewer: 404, Member: 404, Admin: 404, Platform: 404}})
}

// A ticket's subscription: the caller's own, for anyone who may read the
// ticket.
func init() {
	Register("GET /api/v1/items/{item}/subscription", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w) + "/subscription", nil },
		Want:    ReadOK(200),
	})
	Register("PUT /api/v1/items/{item}/subscription", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w) + "/subscription", nil },
		Want:    ReadOK(200),
	})
	Register("DELETE /api/v1/items/{item}/subscription", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + matrixItem(w) + "/subscription", nil },
		Want:    ReadOK(204),
	})
}
