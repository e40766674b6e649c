package apitest_test

import (
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/oidctest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// A browser sign-in keeps the issuer's verified address as the person's
// notification address, confirmed; an unverified one is not kept.
func TestOIDCSignInKeepsTheVerifiedAddress(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcLoginEnv(t, s, iss)
		type settings struct {
			Email          *string
			EmailSource    *string `json:"email_source"`
			EmailConfirmed bool    `json:"email_confirmed"`
		}
		signIn := func(subject string, opts ...oidctest.Option) settings {
			iss.SignInAs(subject, opts...)
			b := e.Browser("")
			if r, hops := visit(t, b, e.URL+"/auth/oidc/login?next=/", ""); r.StatusCode != 200 {
				t.Fatalf("sign in as %s: %d via %v", subject, r.StatusCode, hops)
			}
			var got settings
			b.Must(200, "GET", "/api/v1/me/notifications", nil).JSON(t, &got)
			return got
		}
		got := signIn("oidc|vera", oidctest.Claim("email_verified", true))
		if got.Email == nil || *got.Email != "oidc|vera@example.com" || !got.EmailConfirmed || got.EmailSource == nil || *got.EmailSource != "oidc" {
			t.Errorf("a verified address: %+v", got)
		}
		if got := signIn("oidc|una", oidctest.Claim("email_verified", false)); got.Email != nil || got.EmailConfirmed {
			t.Errorf("an unverified address was kept: %+v", got)
		}
	})
}
