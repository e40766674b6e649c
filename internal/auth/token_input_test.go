package auth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
)

// TestTokenInputIsChecked: what a token request may be — a name of 1–200
// characters on one line, no role on a runner token, at most 32 scopes,
// none twice, an unknown one named with the list of those there are —
// and what it defaults to: an api token lives 90 days and has no scope
// unless given one; a runner token has the runner scope.
func TestTokenInputIsChecked(t *testing.T) {
	api := func(name string, scopes ...string) TokenInput {
		return TokenInput{Name: name, Organization: "acme", Role: "member", Scopes: scopes}
	}
	for _, c := range []struct {
		name string
		in   TokenInput
		want string // "" valid; else a part of the error
	}{
		{"a name of 200", api(strings.Repeat("n", 200)), ""},
		{"a name of 201", api(strings.Repeat("n", 201)), "name"},
		{"a name of two lines", api("a\nb"), "name"},
		{"a runner token with a role", TokenInput{Name: "r", Kind: KindRunner, Role: "admin"}, "role"},
		{"33 scopes", api("s", make([]string, 33)...), "at most 32 scopes"},
		{"a scope twice", api("s", string(access.TrackerRead), string(access.TrackerRead)), "listed twice"},
		{"a runner token with another scope", TokenInput{Name: "r", Kind: KindRunner, Scopes: []string{string(access.TrackerRead)}}, "only scope"},
		{"a runner token with its scope", TokenInput{Name: "r", Kind: KindRunner, Scopes: []string{ScopeRunner}}, ""},
		{"platform.admin on a member token", api("s", string(access.PlatformAdmin)), "platform_admin tokens only"},
		{"platform.admin on a platform_admin token", TokenInput{Name: "p", Role: RolePlatformAdmin, Scopes: []string{string(access.PlatformAdmin)}}, ""},
		{"an unknown scope", api("s", "nope"), strings.Join([]string{string(access.Scoped[0]), string(access.Scoped[1])}, ", ")},
	} {
		_, err := c.in.validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error()+detailsOf(err), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	// Exactly 32 scopes is not too many (the scopes' own errors aside).
	if _, err := api("s", make([]string, 32)...).validate(); err != nil && strings.Contains(detailsOf(err), "at most 32") {
		t.Errorf("32 scopes: %v", err)
	}
	r, err := api("s").validate()
	if err != nil || r.ttl != 90*24*time.Hour || len(r.scopes) != 0 {
		t.Errorf("an api token's defaults: ttl %v scopes %v (%v), want 90 days and none", r.ttl, r.scopes, err)
	}
	r, err = TokenInput{Name: "r", Kind: KindRunner}.validate()
	if err != nil || len(r.scopes) != 1 || r.scopes[0] != ScopeRunner || r.ttl != 0 {
		t.Errorf("a runner token's defaults: %+v %v", r, err)
	}
}

// detailsOf is every field problem of err, as one string.
func detailsOf(err error) string {
	var e *apperr.Error
	if !errors.As(err, &e) {
		return ""
	}
	return fmt.Sprint(e.Details)
}
