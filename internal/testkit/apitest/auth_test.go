package apitest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/oidctest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// OIDC subjects of the tests: vera is a viewer of acme, max a member, ada
// an admin; root is a platform admin by configuration; stranger belongs
// nowhere.
const (
	vera     = "oidc|vera"
	maxSub   = "oidc|max"
	ada      = "oidc|ada"
	root     = "oidc|root"
	stranger = "oidc|stranger"
)

// oidcEnv starts Core trusting iss, with organization acme (project ACME)
// and its members.
func oidcEnv(t *testing.T, s store.Store, iss *oidctest.Issuer) *apitest.Env {
	t.Helper()
	e := apitest.New(t, s, func(c *config.Config) {
		c.Auth.OIDCIssuer = iss.URL
		c.Auth.OIDCAudience = iss.Audience
		c.Auth.PlatformAdmins = []string{root}
	})
	e.Org("acme")
	e.Project("acme", "ACME")
	for sub, role := range map[string]string{vera: "viewer", maxSub: "member", ada: "admin"} {
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+sub, map[string]any{"role": role})
	}
	return e
}

type errBody struct {
	Error struct {
		Code    string
		Message string
		Details []struct{ Field, Message string }
	}
}

func errOf(t *testing.T, r *apitest.Response) errBody {
	t.Helper()
	var b errBody
	r.JSON(t, &b)
	return b
}

// fields lists the fields a 400 names.
func fields(t *testing.T, r *apitest.Response) string {
	t.Helper()
	var out []string
	for _, d := range errOf(t, r).Error.Details {
		out = append(out, d.Field)
	}
	return strings.Join(out, ",")
}

func TestOIDC(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcEnv(t, s, iss)

		// A member reads with a valid identity token.
		e.Must(200, iss.Token(t, vera), "GET", "/api/v1/projects/ACME", nil)
		var orgs struct{ Organizations []struct{ Slug string } }
		e.Must(200, iss.Token(t, vera), "GET", "/api/v1/orgs", nil).JSON(t, &orgs)
		if len(orgs.Organizations) != 1 || orgs.Organizations[0].Slug != "acme" {
			t.Errorf("vera's organizations: %+v", orgs)
		}
		// The principal carries the token's expiry (realtime ends her
		// subscriptions then).
		tok := iss.Token(t, vera, oidctest.ExpiresIn(10*time.Minute))
		p, err := e.Core.Auth.Authenticate(context.Background(), "Bearer "+tok)
		if err != nil {
			t.Fatal(err)
		}
		claims, _ := oidctest.Claims(tok)
		if exp, _ := claims["exp"].(float64); p.ExpiresAt.Unix() != int64(exp) {
			t.Errorf("principal expires at %v, want the token's exp %v", p.ExpiresAt, claims["exp"])
		}
		// Her role holds: a viewer cannot write.
		e.Must(403, iss.Token(t, vera), "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "x", "content": "y"})
		// Someone valid but without a role sees nothing.
		e.Must(404, iss.Token(t, stranger), "GET", "/api/v1/orgs/acme", nil)

		// Changes record the human.
		var k struct{ ID string }
		e.Must(201, iss.Token(t, ada), "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "review", "content": "be kind"}).JSON(t, &k)
		evs, err := event.List(context.Background(), s, event.Filter{EntityType: "skill", EntityID: k.ID})
		if err != nil || len(evs) != 1 {
			t.Fatalf("events %+v, %v", evs, err)
		}
		if ev := evs[0]; ev.ActorKind != event.ActorHuman || ev.ActorSub != ada || ev.ActingFor != "" {
			t.Errorf("actor %s/%s/%s, want human/%s", ev.ActorKind, ev.ActorSub, ev.ActingFor, ada)
		}

		// Bad tokens: 401 with a message that says what is wrong.
		for name, c := range map[string]struct {
			token string
			want  string
		}{
			"expired":        {iss.Token(t, vera, oidctest.Expired()), "expired"},
			"wrong audience": {iss.Token(t, vera, oidctest.Audience("another-app")), "audience"},
			"wrong issuer":   {iss.Token(t, vera, oidctest.IssuedBy("https://evil.example.com")), "issued by a different provider"},
			"bad signature":  {iss.Token(t, vera, oidctest.BadSignature()), "signature"},
			"tampered":       {iss.Token(t, vera, oidctest.Tampered()), "signature"},
			"garbage":        {"a.b.c", "invalid identity token"},
		} {
			r := e.Do(c.token, "GET", "/api/v1/projects/ACME", nil)
			b := errOf(t, r)
			if r.Status != 401 || b.Error.Code != "unauthenticated" || !strings.Contains(b.Error.Message, "invalid identity token") ||
				!strings.Contains(b.Error.Message, c.want) {
				t.Errorf("%s: %d %s, want 401 mentioning %q", name, r.Status, r.Body, c.want)
			}
		}

		// A configured subject is a platform admin; an org admin is not.
		e.Must(201, iss.Token(t, root), "POST", "/api/v1/orgs", map[string]any{"slug": "initech", "name": "Initech"})
		e.Must(403, iss.Token(t, ada), "POST", "/api/v1/orgs", map[string]any{"slug": "hooli", "name": "Hooli"})
		e.Must(200, iss.Token(t, root), "GET", "/api/v1/orgs/acme", nil)
	})
}

func TestOIDCNotConfigured(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := apitest.New(t, s)
		r := e.Must(401, iss.Token(t, root), "GET", "/api/v1/orgs", nil)
		if msg := errOf(t, r).Error.Message; !strings.Contains(msg, "no OIDC issuer is configured") {
			t.Errorf("message %q", msg)
		}
		if iss.Requests() != 0 {
			t.Errorf("Core contacted an issuer it was not configured with")
		}
	})
}

// TestOIDCIssuerDown: Core starts while the identity provider is down
// (discovery is lazy); identity tokens then get 503 while other
// credentials work, and are accepted once the provider is back.
func TestOIDCIssuerDown(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		iss.Stop()
		e := oidcEnv(t, s, iss) // Core starts and serves the bootstrap admin
		r := e.Must(503, iss.Token(t, vera), "GET", "/api/v1/projects/ACME", nil)
		if b := errOf(t, r); b.Error.Code != "unavailable" || !strings.Contains(b.Error.Message, "identity provider") {
			t.Errorf("issuer down: %s", r.Body)
		}
		iss.Start()
		e.Must(200, iss.Token(t, vera), "GET", "/api/v1/projects/ACME", nil)
		// Once discovered, the keys are cached: a short outage does not
		// reject tokens.
		iss.Stop()
		e.Must(200, iss.Token(t, vera), "GET", "/api/v1/projects/ACME", nil)
	})
}

type tokenOut struct {
	Token          string
	ID             string
	Kind           string
	Name           string
	Subject        string
	ActingFor      string `json:"acting_for"`
	OrganizationID string `json:"organization_id"`
	Role           string
	Scopes         []string
	ExpiresAt      *time.Time `json:"expires_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
	CreatedBy      string     `json:"created_by"`
}

// TestTokens: the lifecycle through the API with human creators of every
// role: create within the role ceiling, use, list, revoke.
func TestTokens(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcEnv(t, s, iss)
		var secrets []string
		create := func(want int, cred string, body map[string]any) (tokenOut, *apitest.Response) {
			t.Helper()
			r := e.Must(want, cred, "POST", "/api/v1/tokens", body)
			var out tokenOut
			if want == 201 {
				r.JSON(t, &out)
				secrets = append(secrets, out.Token)
			}
			return out, r
		}
		asVera, asMax, asAda := iss.Token(t, vera), iss.Token(t, maxSub), iss.Token(t, ada)

		// The role ceiling.
		before := time.Now()
		vt, _ := create(201, asVera, map[string]any{"name": "vera's ci", "organization": "acme"})
		if vt.Role != "viewer" || vt.Kind != "api" || vt.CreatedBy != vera || vt.ActingFor != vera || !strings.HasPrefix(vt.Token, auth.TokenPrefix) {
			t.Fatalf("vera's token %+v", vt)
		}
		if vt.ExpiresAt == nil || vt.ExpiresAt.Before(before.Add(auth.DefaultAPITokenTTL-time.Minute)) || vt.ExpiresAt.After(time.Now().Add(auth.DefaultAPITokenTTL)) {
			t.Errorf("default expiry %v", vt.ExpiresAt)
		}
		create(403, asVera, map[string]any{"name": "x", "organization": "acme", "role": "member"})
		mt, _ := create(201, asMax, map[string]any{"name": "max's bot", "organization": "acme", "role": "member", "expires_in": "720h", "scopes": []string{"tracker.read"}})
		if mt.Role != "member" || len(mt.Scopes) != 1 {
			t.Errorf("max's token %+v", mt)
		}
		create(403, asMax, map[string]any{"name": "x", "organization": "acme", "role": "admin"})
		at, _ := create(201, asAda, map[string]any{"name": "ada's admin", "organization": "acme", "role": "admin"})
		create(403, asAda, map[string]any{"name": "x", "role": "platform_admin"})
		create(403, asAda, map[string]any{"name": "x", "kind": "runner"})
		create(404, iss.Token(t, stranger), map[string]any{"name": "x", "organization": "acme"})
		create(404, asAda, map[string]any{"name": "x", "organization": "globex"})

		// Bad input names the field.
		for body, want := range map[string]string{
			`{"name":"x"}`: "organization",
			`{"name":"x","organization":"acme","kind":"run"}`:                               "kind",
			`{"name":"x","organization":"acme","expires_in":"9000h"}`:                       "expires_in",
			`{"name":"x","organization":"acme","expires_in":"soon"}`:                        "expires_in",
			`{"name":"x","organization":"acme","role":"owner"}`:                             "role",
			`{"organization":"acme"}`:                                                       "name",
			`{"name":"x","organization":"acme","secret":"mine"}`:                            "secret",
			`{"name":"x","organization":"acme","scopes":"ci"}`:                              "scopes",
			`{"name":"x","organization":"acme","scopes":["ci"]}`:                            "scopes[0]",
			`{"name":"x","organization":"acme","scopes":["tracker.read","platform.admin"]}`: "scopes[1]",
			`{"name":"x","kind":"runner","scopes":["tracker.read"]}`:                        "scopes[0]",
		} {
			r := e.Must(400, asAda, "POST", "/api/v1/tokens", body)
			if got := fields(t, r); !strings.Contains(got, want) {
				t.Errorf("%s: fields %q, want %q", body, got, want)
			}
		}

		// The platform admin makes runner and platform_admin tokens.
		rt, _ := create(201, apitest.BootstrapToken, map[string]any{"name": "runner-1", "kind": "runner"})
		if rt.ExpiresAt != nil || len(rt.Scopes) != 1 || rt.Scopes[0] != "runner" || rt.OrganizationID != "" {
			t.Errorf("runner token %+v", rt)
		}
		pt, _ := create(201, iss.Token(t, root), map[string]any{"name": "ops", "role": "platform_admin", "expires_in": "1h"})

		// Using tokens: each acts within its role and organization.
		e.Must(200, vt.Token, "GET", "/api/v1/projects/ACME", nil)
		e.Must(403, vt.Token, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "x", "content": "y"})
		e.Must(201, at.Token, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "by-token", "content": "y"})
		e.Must(404, rt.Token, "GET", "/api/v1/projects/ACME", nil)
		e.Must(201, pt.Token, "POST", "/api/v1/orgs", map[string]any{"slug": "umbrella", "name": "Umbrella"})
		e.Must(404, at.Token, "GET", "/api/v1/orgs/umbrella", nil)
		// Scopes limit a token below its role: max's member token may only read.
		e.Must(200, mt.Token, "GET", "/api/v1/projects/ACME", nil)
		if r := e.Must(403, mt.Token, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "x"}); !strings.Contains(string(r.Body), "scopes (tracker.read) do not include tracker.write") {
			t.Errorf("scoped token's refusal: %s", r.Body)
		}
		readOnlyOps, _ := create(201, iss.Token(t, root), map[string]any{"name": "ops-read", "role": "platform_admin", "scopes": []string{"tracker.read"}})
		e.Must(200, readOnlyOps.Token, "GET", "/api/v1/projects/ACME", nil)
		e.Must(403, readOnlyOps.Token, "POST", "/api/v1/orgs", map[string]any{"slug": "initech", "name": "Initech"})
		// Tokens cannot make tokens, not even a platform_admin token.
		create(403, vt.Token, map[string]any{"name": "x", "organization": "acme", "role": "viewer"})
		create(403, pt.Token, map[string]any{"name": "x", "role": "platform_admin"})
		// What the token did is recorded as the service acting for its creator.
		evs, err := event.List(context.Background(), s, event.Filter{EntityType: "skill"})
		if err != nil || len(evs) != 1 || evs[0].ActorKind != event.ActorService || evs[0].ActorSub != "token:"+at.ID || evs[0].ActingFor != ada {
			t.Errorf("token's event %+v, %v", evs, err)
		}

		// Listing: one's own tokens; all for platform admins.
		list := func(cred string) []tokenOut {
			t.Helper()
			var l struct{ Tokens []tokenOut }
			e.Must(200, cred, "GET", "/api/v1/tokens", nil).JSON(t, &l)
			return l.Tokens
		}
		if l := list(asVera); len(l) != 1 || l[0].ID != vt.ID || l[0].Token != "" {
			t.Errorf("vera lists %+v", l)
		}
		if l := list(vt.Token); len(l) != 0 {
			t.Errorf("a token lists %+v", l)
		}
		if l := list(apitest.BootstrapToken); len(l) != 6 {
			t.Errorf("platform admin lists %d tokens, want 6", len(l))
		}
		var runners struct{ Tokens []tokenOut }
		e.Must(200, apitest.BootstrapToken, "GET", "/api/v1/tokens?kind=runner", nil).JSON(t, &runners)
		if len(runners.Tokens) != 1 || runners.Tokens[0].ID != rt.ID {
			t.Errorf("runner tokens %+v", runners.Tokens)
		}
		e.Must(400, asVera, "GET", "/api/v1/tokens?kind=magic", nil)

		// Revoking: not found for others; then the token no longer works.
		e.Must(404, asAda, "DELETE", "/api/v1/tokens/"+vt.ID, nil)
		e.Must(404, at.Token, "DELETE", "/api/v1/tokens/"+vt.ID, nil)
		e.Must(404, asVera, "DELETE", "/api/v1/tokens/no-such-token", nil)
		e.Must(204, asVera, "DELETE", "/api/v1/tokens/"+vt.ID, nil)
		r := e.Must(401, vt.Token, "GET", "/api/v1/projects/ACME", nil)
		if msg := errOf(t, r).Error.Message; msg != "token revoked" {
			t.Errorf("revoked: %q", msg)
		}
		e.Must(204, asVera, "DELETE", "/api/v1/tokens/"+vt.ID, nil) // idempotent
		e.Must(204, apitest.BootstrapToken, "DELETE", "/api/v1/tokens/"+mt.ID, nil)
		e.Must(401, mt.Token, "GET", "/api/v1/projects/ACME", nil)
		if l := list(asVera); len(l) != 1 || l[0].RevokedAt == nil {
			t.Errorf("revoked token listed as %+v", l)
		}
		revoked, err := event.List(context.Background(), s, event.Filter{EntityType: "token", EntityID: vt.ID})
		if err != nil || len(revoked) != 2 || revoked[1].Type != "token.revoked" || revoked[1].ActorSub != vera {
			t.Errorf("token events %+v, %v", revoked, err)
		}

		// An expired token (issued directly, already past its expiry).
		past := time.Now().Add(-time.Minute)
		secret, _, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: ada}, auth.KindAPI, "old", "", "viewer", nil, &past, past.Add(-time.Hour))
		if err := e.Core.Applier.Apply(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, secret)
		if msg := errOf(t, e.Must(401, secret, "GET", "/api/v1/orgs", nil)).Error.Message; msg != "token expired" {
			t.Errorf("expired: %q", msg)
		}

		checkNoSecrets(t, e, s, secrets, []string{asVera, asAda, apitest.BootstrapToken})
	})
}

// checkNoSecrets: after creation, neither a secret nor its hash appears in
// Core's logs, in any event, or in any listing.
func checkNoSecrets(t *testing.T, e *apitest.Env, s store.Store, secrets, readers []string) {
	t.Helper()
	var haystack []string
	haystack = append(haystack, e.Logs())
	evs, err := event.List(context.Background(), s, event.Filter{Limit: event.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		haystack = append(haystack, string(b))
	}
	for _, cred := range readers {
		haystack = append(haystack, string(e.Must(200, cred, "GET", "/api/v1/tokens", nil).Body))
	}
	if len(evs) < len(secrets) {
		t.Fatalf("only %d events", len(evs))
	}
	for _, h := range haystack[1:] {
		if strings.Contains(h, `"hash"`) {
			t.Errorf("a hash field leaks: %.200s", h)
		}
	}
	for _, secret := range secrets {
		for _, needle := range []string{secret, auth.Hash(secret), strings.TrimPrefix(secret, auth.TokenPrefix)} {
			for _, h := range haystack {
				if strings.Contains(h, needle) {
					t.Errorf("secret material %.12s… leaks into %.200s", needle, h)
				}
			}
		}
	}
	// The stored form is the hash, never the secret.
	for _, secret := range secrets {
		rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM tokens WHERE hash = ?`, auth.Hash(secret))
		var n int64
		if err != nil || rows.Scan(0, &n) != nil || n != 1 {
			t.Errorf("token not stored by its hash: %v", err)
		}
	}
}

// TestTokenNeverActsAboveItsCreatorInAProject: the finding "a token escapes
// its creator's project role". ada, an organization admin overridden to
// viewer in ACME, creates an admin token: in ACME it acts as a viewer, as
// she does; in BETA, where no override applies, as an admin. The cap
// follows her current role: lifted with the override, gone with her
// membership (the organization disappears from the token's list too).
func TestTokenNeverActsAboveItsCreatorInAProject(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcEnv(t, s, iss)
		e.Project("acme", "BETA")
		e.Admin(200, "PUT", "/api/v1/projects/ACME/members/"+ada, map[string]any{"role": "viewer"})
		asAda := iss.Token(t, ada)
		var tk tokenOut
		e.Must(201, asAda, "POST", "/api/v1/tokens", map[string]any{"name": "ada's admin", "organization": "acme", "role": "admin"}).JSON(t, &tk)
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t"}).JSON(t, &it)
		publish := map[string]any{"version": 0, "definition": map[string]any{"stages": []any{map[string]any{"id": "work", "kind": "agent"}}}}

		for who, cred := range map[string]string{"ada": asAda, "her token": tk.Token} {
			for _, c := range []struct {
				method, path string
				body         any
			}{
				{"PATCH", "/api/v1/items/" + it.Key, map[string]any{"version": 1, "title": "Renamed"}},
				{"PUT", "/api/v1/projects/ACME/pipelines/default", publish},
				{"DELETE", "/api/v1/projects/ACME/members/" + ada, nil},
			} {
				if r := e.Do(cred, c.method, c.path, c.body); r.Status != 403 {
					t.Errorf("%s: %s %s: %d %s, want 403 (she is a viewer in ACME)", who, c.method, c.path, r.Status, r.Body)
				}
			}
			e.Must(200, cred, "GET", "/api/v1/projects/ACME", nil)
		}
		e.Must(200, tk.Token, "PUT", "/api/v1/projects/BETA/pipelines/default", publish) // admin where no override applies
		e.Must(201, tk.Token, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "GAMMA", "name": "Gamma"})

		// Her override removed: the token is an admin in ACME too.
		e.Admin(204, "DELETE", "/api/v1/projects/ACME/members/"+ada, nil)
		e.Must(200, tk.Token, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": 1, "title": "Renamed"})

		// Her membership gone (another admin remains): the token holds
		// nothing and lists no organization.
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/oidc|eve", map[string]any{"role": "admin"})
		e.Admin(204, "DELETE", "/api/v1/orgs/acme/members/"+ada, nil)
		e.Must(404, tk.Token, "GET", "/api/v1/projects/BETA", nil)
		var orgs struct{ Organizations []struct{ Slug string } }
		e.Must(200, tk.Token, "GET", "/api/v1/orgs", nil).JSON(t, &orgs)
		if len(orgs.Organizations) != 0 {
			t.Errorf("the token of a removed member lists %+v", orgs.Organizations)
		}
	})
}

// TestProjectOnlyMemberToken: a person with a role in one project only
// creates a token for the organization; it acts in that project with at
// most that role, and nowhere else.
func TestProjectOnlyMemberToken(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcEnv(t, s, iss)
		e.Project("acme", "BETA")
		e.Admin(200, "PUT", "/api/v1/projects/ACME/members/"+stranger, map[string]any{"role": "member"})
		asPam := iss.Token(t, stranger)
		e.Must(403, asPam, "POST", "/api/v1/tokens", map[string]any{"name": "x", "organization": "acme", "role": "admin"})
		var tk tokenOut
		e.Must(201, asPam, "POST", "/api/v1/tokens", map[string]any{"name": "pam's bot", "organization": "acme"}).JSON(t, &tk)
		if tk.Role != "member" {
			t.Fatalf("default role %q, want member (her highest role in acme)", tk.Role)
		}
		for _, cred := range []string{asPam, tk.Token} {
			e.Must(201, cred, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "mine"})
			e.Must(403, cred, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "name": "x"})
			e.Must(404, cred, "GET", "/api/v1/projects/BETA", nil)
			e.Must(404, cred, "GET", "/api/v1/orgs/acme", nil)
		}
		var orgs struct{ Organizations []struct{ Slug string } }
		e.Must(200, tk.Token, "GET", "/api/v1/orgs", nil).JSON(t, &orgs)
		if len(orgs.Organizations) != 1 || orgs.Organizations[0].Slug != "acme" {
			t.Errorf("her token lists %+v", orgs.Organizations)
		}
	})
}
