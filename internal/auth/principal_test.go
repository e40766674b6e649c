package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestAReservedCredentialIsNeverACaller: a service's shared credential,
// once reserved, is refused wherever a bearer is, whatever it looks like;
// reserving "" reserves nothing.
func TestAReservedCredentialIsNeverACaller(t *testing.T) {
	a := auth.NewAuthenticator(nil, nil, bootstrapSecret, nil, auth.OIDCConfig{})
	a.Reserve("")
	a.Reserve(bootstrapSecret + "-knowledge")
	p, err := a.Authenticate(context.Background(), "Bearer "+bootstrapSecret+"-knowledge")
	wantUnauthenticated(t, "the reserved credential", p, err, "service credential is not a user credential")
	if a.IsReserved("") || a.IsReserved(bootstrapSecret) || !a.IsReserved(bootstrapSecret+"-knowledge") {
		t.Error("IsReserved answers for other credentials than the reserved one")
	}
	if p, err := a.Authenticate(context.Background(), "Bearer "+bootstrapSecret); err != nil || p.Subject != auth.BootstrapSubject {
		t.Errorf("the bootstrap token beside a reserved credential: %+v %v", p, err)
	}
	p, err = a.Authenticate(context.Background(), "Bearer something-else")
	wantUnauthenticated(t, "an unknown credential", p, err, "unknown credential")
}

// TestWhatAPrincipalHolds: a person holds every scope and no token grant;
// a runner token a grant of no role; an API token the grant of its
// organization, role and creator's cap.
func TestWhatAPrincipalHolds(t *testing.T) {
	human := &auth.Principal{Kind: event.ActorHuman, Subject: "olga"}
	if !human.HasScope("tracker.write") || !human.HasScope("anything") {
		t.Error("a person lacks a scope")
	}
	if g, ok := human.TokenGrant(); ok || g.OrgID != "" {
		t.Errorf("a person's token grant: %+v %v", g, ok)
	}
	runner := &auth.Principal{TokenID: "t1", TokenKind: auth.KindRunner, Role: "admin", OrgID: "o1"}
	if g, ok := runner.TokenGrant(); !ok || g.Role != "" || g.OrgID != "" {
		t.Errorf("a runner token's grant: %+v %v, want one of no role", g, ok)
	}
	api := &auth.Principal{TokenID: "t2", TokenKind: auth.KindAPI, Role: "member", OrgID: "o1", CappedBy: "max", Scopes: []string{"tracker.read"}}
	if g, ok := api.TokenGrant(); !ok || g.Role != "member" || g.OrgID != "o1" || g.CappedBy != "max" || len(g.Scopes) != 1 {
		t.Errorf("an API token's grant: %+v %v", g, ok)
	}
}

// TestAPlatformAdminTokenLapsesWithItsCreator: a platform_admin token
// acts as a platform admin only while its creator is one; after that it
// holds no role at all.
func TestAPlatformAdminTokenLapsesWithItsCreator(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		c, err := f.svc.Create(ctx, root, auth.TokenInput{Name: "ops", Role: auth.RolePlatformAdmin, ExpiresIn: "24h"})
		if err != nil {
			t.Fatal(err)
		}
		demoted := auth.NewAuthenticator(s, f.clock, "", nil, auth.OIDCConfig{})
		p, err := demoted.Authenticate(ctx, "Bearer "+c.Secret)
		if err != nil || p.PlatformAdmin || p.Role != "" {
			t.Errorf("the token after its creator's demotion: %+v %v, want no platform admin and no role", p, err)
		}
	})
}

// TestABootstrapTokenLapsesWithTheBootstrapToken: a platform_admin token
// the bootstrap admin created is a platform admin only while a bootstrap
// token is set; the subject "bootstrap" alone makes nobody an admin.
func TestABootstrapTokenLapsesWithTheBootstrapToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		boot := &auth.Principal{Kind: event.ActorHuman, Subject: auth.BootstrapSubject, PlatformAdmin: true}
		c, err := f.svc.Create(ctx, boot, auth.TokenInput{Name: "ops", Role: auth.RolePlatformAdmin, ExpiresIn: "24h"})
		if err != nil {
			t.Fatal(err)
		}
		with := auth.NewAuthenticator(s, f.clock, bootstrapSecret, nil, auth.OIDCConfig{})
		if p, err := with.Authenticate(ctx, "Bearer "+c.Secret); err != nil || !p.PlatformAdmin || p.Role != auth.RolePlatformAdmin {
			t.Errorf("the bootstrap admin's token while a bootstrap token is set: %+v %v, want a platform admin", p, err)
		}
		without := auth.NewAuthenticator(s, f.clock, "", nil, auth.OIDCConfig{})
		if p, err := without.Authenticate(ctx, "Bearer "+c.Secret); err != nil || p.PlatformAdmin || p.Role != "" {
			t.Errorf("the bootstrap admin's token with no bootstrap token set: %+v %v, want no platform admin and no role", p, err)
		}
	})
}

// TestValidGuardMatchesOnlyALiveToken: the guard a batch acting for a
// token carries matches that token's row while it is neither revoked nor
// expired (expiring at now is expired), and no other row.
func TestValidGuardMatchesOnlyALiveToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		mk := func(name, expires string) string {
			t.Helper()
			c, err := f.svc.Create(ctx, admin, auth.TokenInput{Name: name, Organization: "acme", Role: "viewer", ExpiresIn: expires})
			if err != nil {
				t.Fatal(err)
			}
			return c.ID
		}
		live, hour, revoked := mk("live", "720h"), mk("hour", "1h"), mk("revoked", "720h")
		if err := f.svc.Revoke(ctx, admin, revoked); err != nil {
			t.Fatal(err)
		}
		matches := func(id string, now time.Time) int64 {
			t.Helper()
			res, err := s.Exec(ctx, auth.ValidGuard(id, now))
			if err != nil || len(res) != 1 {
				t.Fatalf("ValidGuard: %v %v", res, err)
			}
			return res[0].RowsAffected
		}
		for _, c := range []struct {
			name string
			id   string
			now  time.Time
			want int64
		}{
			{"a live token", live, start, 1},
			{"a token a millisecond before it expires", hour, start.Add(time.Hour - time.Millisecond), 1},
			{"a token as it expires", hour, start.Add(time.Hour), 0},
			{"a revoked token", revoked, start, 0},
			{"no token", "nope", start, 0},
		} {
			if got := matches(c.id, c.now); got != c.want {
				t.Errorf("%s: the guard matched %d rows, want %d", c.name, got, c.want)
			}
		}
		if err := auth.StillValid(ctx, s, hour, start.Add(time.Hour)); err == nil {
			t.Error("StillValid as the token expires: valid")
		}
	})
}

// TestATokenIsFoundByItsCreatorOrAPlatformAdminOnly: for anyone else a
// token does not exist, like an unknown one.
func TestATokenIsFoundByItsCreatorOrAPlatformAdminOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "ci", Organization: "acme", Role: "viewer"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*auth.Principal{member, root} {
			if tok, err := f.svc.Find(ctx, p, c.ID); err != nil || tok.ID != c.ID || tok.Name != "ci" {
				t.Errorf("%s finds the token: %+v %v", p.Subject, tok, err)
			}
		}
		for _, look := range []struct {
			p  *auth.Principal
			id string
		}{{admin, c.ID}, {viewer, c.ID}, {member, "nope"}} {
			if _, err := f.svc.Find(ctx, look.p, look.id); code(err) != "not_found" {
				t.Errorf("%s looks up %s: %v, want not found", look.p.Subject, look.id, err)
			}
		}
	})
}

// TestWhoIsAPlatformAdmin: the people who may read every organization
// (what the notifier asks before telling someone about a project) are
// the listed platform admins, and the bootstrap subject only while a
// bootstrap token is set; nobody else, and not an empty subject.
func TestWhoIsAPlatformAdmin(t *testing.T) {
	withBootstrap := auth.NewAuthenticator(nil, nil, bootstrapSecret, []string{"root"}, auth.OIDCConfig{})
	without := auth.NewAuthenticator(nil, nil, "", []string{"root"}, auth.OIDCConfig{})
	for _, c := range []struct {
		a       *auth.Authenticator
		what    string
		subject string
		want    bool
	}{
		{withBootstrap, "with a bootstrap token", auth.BootstrapSubject, true},
		{without, "without a bootstrap token", auth.BootstrapSubject, false},
		{withBootstrap, "with a bootstrap token", "root", true},
		{without, "without a bootstrap token", "root", true},
		{withBootstrap, "with a bootstrap token", "olga", false},
		{without, "without a bootstrap token", "olga", false},
		{withBootstrap, "with a bootstrap token", "", false},
	} {
		if got := c.a.IsPlatformAdmin(c.subject); got != c.want {
			t.Errorf("%s, is %q a platform admin: %v, want %v", c.what, c.subject, got, c.want)
		}
	}
}
