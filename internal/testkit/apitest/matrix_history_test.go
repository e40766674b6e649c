package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// History routes: each history is read with the authorization of its
// entity. An organization's own history is its admins' (it holds its
// members and tokens); the platform's is everyone's (as the platform is),
// its runners, sessions and tokens only the platform admins'; a runner's
// is the platform admins'; a token's is its creator's and the platform admins' (for anyone
// else the token does not exist, as when revoking it).
func init() {
	Register("GET /api/v1/orgs/{org}/events", Case{Prepare: fixed("/api/v1/orgs/acme/events", nil), Want: AdminOK(200)})
	Register("GET /api/v1/platform/events", Case{Prepare: fixed("/api/v1/platform/events", nil), Want: AnyOK(200)})
	Register("GET /api/v1/runners/{runner}/events", Case{
		Prepare: func(w *World) (string, any) { return "/api/v1/runners/" + matrixRunner(w) + "/events", nil },
		Want:    PlatformOK(200),
	})
	Register("GET /api/v1/tokens/{id}/events", Case{
		Prepare: func(w *World) (string, any) {
			var tk struct{ ID string }
			w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": fmt.Sprintf("history-%d", w.Unique()), "organization": w.SlugA}).JSON(w.T, &tk)
			return "/api/v1/tokens/" + tk.ID + "/events", nil
		},
		Want: map[string]int{None: 401, Other: 404, Viewer: 404, Member: 404, Admin: 404, Platform: 200},
	})
}
