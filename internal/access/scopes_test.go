package access_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestScopesLimitAToken: a token with scopes may use only the permissions
// they name, even where its role grants more, and is told which scopes it
// has; a credential check (Authenticated) needs no scope.
func TestScopesLimitAToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		seed(t, s)
		r := &access.Resolver{Store: s}
		ctx := context.Background()
		scopes := []string{string(access.TrackerRead), string(access.RunManage)}
		tok := token{OrgID: org, Role: access.Admin, Scopes: scopes}
		for _, perm := range scoped {
			err := r.Check(ctx, tok, perm, org, "")
			if slices.Contains(scopes, string(perm)) {
				if err != nil {
					t.Errorf("Check(%s) of a token scoped to it: %v, want allowed", perm, err)
				}
				continue
			}
			if !isCode(err, apperr.Forbidden) || !strings.Contains(err.Error(), "scopes (tracker.read, run.manage) do not include "+string(perm)) {
				t.Errorf("Check(%s) of an admin token scoped to %v: %v, want forbidden naming its scopes", perm, scopes, err)
			}
		}
		if err := r.Check(ctx, tok, access.Authenticated, "", ""); err != nil {
			t.Errorf("Check(authenticated) of a scoped token: %v, want allowed", err)
		}
	})
}

// TestValidScope: a scope names one of the permissions a token may be
// limited to, and nothing else.
func TestValidScope(t *testing.T) {
	for _, s := range []string{"tracker.read", "tracker.write", "run.manage", "project.update", "member.manage", "platform.admin"} {
		if !access.ValidScope(s) {
			t.Errorf("ValidScope(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "authenticated", "tracker", "tracker.admin", "Tracker.Read"} {
		if access.ValidScope(s) {
			t.Errorf("ValidScope(%q) = true, want false", s)
		}
	}
}
