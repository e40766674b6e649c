package apitest_test

import (
	"fmt"

	. "github.com/ballet/ballet/internal/testkit/apitest"
)

// Token routes. Every base matrix role except Platform (the bootstrap
// admin, a human) is itself an API token, and a token cannot create
// tokens: they get 403 whatever the body. Humans of every role create
// tokens within their role (auth_test.go, with OIDC users): the people of
// the override rows too, a project-only member included. Only a token's
// creator or a platform admin finds it to revoke; for everyone else it
// does not exist.
// peopleCreateTokens: each override row's person creates a viewer token of
// acme (201); the token it created may not (403).
func peopleCreateTokens() map[string]int {
	out := map[string]int{}
	for _, o := range Overrides {
		out[o.Name], out[TokenRow(o)] = 201, 403
	}
	return out
}

func init() {
	Register("POST /api/v1/tokens", Case{
		Prepare: func(w *World) (string, any) {
			return "/api/v1/tokens", map[string]any{"name": fmt.Sprintf("matrix-%d", w.Unique()), "organization": w.SlugA, "role": "viewer"}
		},
		Want:     map[string]int{None: 401, Other: 403, Viewer: 403, Member: 403, Admin: 403, Platform: 201},
		Override: peopleCreateTokens(),
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
