package apitest_test

import (
	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Webhook routes: an organization's or a project's admins (project.update
// there); another organization's admin finds nothing. Each attempt works
// on a hook of its own, created by the platform admin (a public literal
// address: nothing to resolve; no cause, so nothing is delivered).
func init() {
	for _, sc := range []struct{ route, path string }{
		{"/api/v1/orgs/{org}/webhooks", "/api/v1/orgs/acme/webhooks"},
		{"/api/v1/projects/{project}/webhooks", "/api/v1/projects/ACME/webhooks"},
	} {
		base := sc.path
		hook := func(w *World) string {
			var h struct{ ID string }
			w.Admin(201, "POST", base, map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"*"}}).JSON(w.T, &h)
			return base + "/" + h.ID
		}
		Register("POST "+sc.route, Case{Prepare: fixed(base, map[string]any{"url": "https://93.184.216.34/new", "events": []string{"flow.failed"},
			"format": "slack"}), Want: AdminOK(201)})
		Register("GET "+sc.route, Case{Prepare: fixed(base, nil), Want: AdminOK(200)})
		Register("GET "+sc.route+"/{id}", Case{Prepare: func(w *World) (string, any) { return hook(w), nil }, Want: AdminOK(200)})
		Register("PATCH "+sc.route+"/{id}", Case{Prepare: func(w *World) (string, any) { return hook(w), map[string]any{"active": false} },
			Want: AdminOK(200)})
		Register("DELETE "+sc.route+"/{id}", Case{Prepare: func(w *World) (string, any) { return hook(w), nil }, Want: AdminOK(204)})
		Register("GET "+sc.route+"/{id}/deliveries", Case{Prepare: func(w *World) (string, any) { return hook(w) + "/deliveries", nil },
			Want: AdminOK(200)})
		Register("POST "+sc.route+"/{id}/deliveries/{delivery}/redeliver", Case{
			Prepare: func(w *World) (string, any) {
				return hook(w) + "/deliveries/01a24975-3db3-7c34-b51c-18c88b0af079/redeliver", nil
			},
			Want: map[string]int{None: 401, Other: 404, Viewer: 403, Member: 403, Admin: 404, Platform: 404}})
	}
}
