package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Session routes. The sign-in's credential is its body (the bootstrap
// token here), whatever bearer the caller sends: everyone gets 201. Who-am-I
// and sign-out need only a valid credential; a bearer has no session to end.
func init() {
	Register("POST /api/v1/session", Case{
		Prepare: fixed("/api/v1/session", map[string]any{"token": BootstrapToken}),
		Want:    map[string]int{None: 201, Other: 201, Viewer: 201, Member: 201, Admin: 201, Platform: 201},
	})
	Register("GET /api/v1/session", Case{Prepare: fixed("/api/v1/session", nil), Want: AnyOK(200)})
	Register("DELETE /api/v1/session", Case{Prepare: fixed("/api/v1/session", nil), Want: AnyOK(204)})
}

func init() {
	Register("GET /api/v1/needs-me", Case{Prepare: fixed("/api/v1/needs-me", nil), Want: AnyOK(200)})
	Register("GET /api/v1/projects/{project}/permissions", Case{Prepare: fixed("/api/v1/projects/ACME/permissions", nil), Want: ReadOK(200)})
}
