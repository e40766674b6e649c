package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/testkit/apitest"
)

func fixed(path string, body any) func(*World) (string, any) {
	return func(*World) (string, any) { return path, body }
}

func init() {
	Register("POST /api/v1/orgs", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/orgs", map[string]any{"slug": fmt.Sprintf("new-org-%d", w.Unique()), "name": "New"}
		},
		Want: PlatformOK(201),
	})
	Register("GET /api/v1/orgs", Case{Prepare: fixed("/api/v1/orgs", nil), Want: AnyOK(200)})
	Register("GET /api/v1/orgs/{org}", Case{Prepare: fixed("/api/v1/orgs/acme", nil), Want: ReadOK(200)})
	Register("PATCH /api/v1/orgs/{org}", Case{
		Prepare: func(w *World) (string, any) {
			var o struct{ Version int64 }
			w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(w.T, &o)
			return "/api/v1/orgs/acme", map[string]any{"version": o.Version, "name": fmt.Sprintf("Acme %d", w.Unique())}
		},
		Want: AdminOK(200),
	})
	Register("POST /api/v1/orgs/{org}/projects", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/orgs/acme/projects", map[string]any{"key": fmt.Sprintf("NP%d", w.Unique()), "name": "New project"}
		},
		Want: AdminOK(201),
	})
	Register("GET /api/v1/orgs/{org}/projects", Case{Prepare: fixed("/api/v1/orgs/acme/projects", nil), Want: ReadOK(200)})
	Register("GET /api/v1/projects/{project}", Case{Prepare: fixed("/api/v1/projects/ACME", nil), Want: ReadOK(200)})
	Register("PATCH /api/v1/projects/{project}", Case{
		Prepare: func(w *World) (string, any) {
			var p struct{ Version int64 }
			w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(w.T, &p)
			return "/api/v1/projects/ACME", map[string]any{"version": p.Version, "name": fmt.Sprintf("Renamed %d", w.Unique())}
		},
		Want: AdminOK(200),
	})
	Register("GET /api/v1/orgs/{org}/members", Case{Prepare: fixed("/api/v1/orgs/acme/members", nil), Want: ReadOK(200)})
	Register("PUT /api/v1/orgs/{org}/members/{subject}", Case{
		Prepare: func(w *World) (string, any) {
			return fmt.Sprintf("/api/v1/orgs/acme/members/user-%d", w.Unique()), map[string]any{"role": "member"}
		},
		Want: AdminOK(200),
	})
	Register("DELETE /api/v1/orgs/{org}/members/{subject}", Case{
		Prepare: func(w *World) (string, any) {
			subject := fmt.Sprintf("user-%d", w.Unique())
			w.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+subject, map[string]any{"role": "viewer"})
			return "/api/v1/orgs/acme/members/" + subject, nil
		},
		Want: AdminOK(204),
	})
	Register("GET /api/v1/projects/{project}/members", Case{Prepare: fixed("/api/v1/projects/ACME/members", nil), Want: ReadOK(200)})
	Register("PUT /api/v1/projects/{project}/members/{subject}", Case{
		Prepare: func(w *World) (string, any) {
			return fmt.Sprintf("/api/v1/projects/ACME/members/user-%d", w.Unique()), map[string]any{"role": "admin"}
		},
		Want: AdminOK(200),
	})
	Register("DELETE /api/v1/projects/{project}/members/{subject}", Case{
		Prepare: func(w *World) (string, any) {
			subject := fmt.Sprintf("user-%d", w.Unique())
			w.Admin(200, "PUT", "/api/v1/projects/ACME/members/"+subject, map[string]any{"role": "viewer"})
			return "/api/v1/projects/ACME/members/" + subject, nil
		},
		Want: AdminOK(204),
	})
	Register("GET /api/v1/platform", Case{Prepare: fixed("/api/v1/platform", nil), Want: AnyOK(200)})
	Register("PATCH /api/v1/platform", Case{
		Prepare: func(w *World) (string, any) {
			var p struct{ Version int64 }
			w.Admin(200, "GET", "/api/v1/platform", nil).JSON(w.T, &p)
			return "/api/v1/platform", map[string]any{"version": p.Version, "concurrency_limit": w.Unique()}
		},
		Want: PlatformOK(200),
	})
	Register("POST /api/v1/platform/pause", Case{Prepare: fixed("/api/v1/platform/pause", nil), Want: PlatformOK(200)})
	Register("POST /api/v1/platform/resume", Case{Prepare: fixed("/api/v1/platform/resume", nil), Want: PlatformOK(200)})
}
