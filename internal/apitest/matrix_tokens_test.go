package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/apitest"
)

// Token routes. Every matrix role except Platform (the bootstrap admin, a
// human) is itself an API token, and a token cannot create tokens: they
// get 403 whatever the body. Humans of every role create tokens within
// their role (auth_test.go, with OIDC users). Only a token's creator or a
// platform admin finds it to revoke; for everyone else it does not exist.
func init() {
	Register("POST /api/v1/tokens", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/tokens", map[string]any{"name": fmt.Sprintf("matrix-%d", w.Unique()), "organization": w.SlugA, "role": "viewer"}
		},
		Want: map[string]int{None: 401, Other: 403, Viewer: 403, Member: 403, Admin: 403, Platform: 201},
	})
	Register("GET /api/v1/tokens", Case{Prepare: fixed("/api/v1/tokens", nil), Want: AnyOK(200)})
	Register("DELETE /api/v1/tokens/{id}", Case{
		Prepare: func(w *World) (string, any) {
			var tk struct{ ID string }
			w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": fmt.Sprintf("revoke-%d", w.Unique()), "organization": w.SlugA}).JSON(w.T, &tk)
			return "/api/v1/tokens/" + tk.ID, nil
		},
		Want: map[string]int{None: 401, Other: 404, Viewer: 404, Member: 404, Admin: 404, Platform: 204},
	})
}
