package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

func init() {
	Register("GET /api/v1/projects/{project}/budget", Case{Prepare: fixed("/api/v1/projects/ACME/budget", nil), Want: ReadOK(200)})
	Register("GET /api/v1/items/{item}/budget", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/items/" + readyTicket(w) + "/budget", nil },
		Want:    ReadOK(200),
	})
	Register("GET /api/v1/projects/{project}/flows", Case{Prepare: fixed("/api/v1/projects/ACME/flows?status=running", nil), Want: ReadOK(200)})
}
