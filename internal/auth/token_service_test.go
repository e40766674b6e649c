package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

var start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type fixture struct {
	s     store.Store
	clock *clock.Fake
	svc   *auth.TokenService
	authn *auth.Authenticator
	orgID string
}

var (
	viewer = &auth.Principal{Kind: event.ActorHuman, Subject: "vera"}
	member = &auth.Principal{Kind: event.ActorHuman, Subject: "max"}
	admin  = &auth.Principal{Kind: event.ActorHuman, Subject: "ada"}
	root   = &auth.Principal{Kind: event.ActorHuman, Subject: "root", PlatformAdmin: true}
	nobody = &auth.Principal{Kind: event.ActorHuman, Subject: "stranger"}
)

// setup makes organization "acme" with vera (viewer), max (member) and ada
// (admin), and a token service and authenticator on a fake clock.
func setup(t *testing.T, s store.Store) *fixture {
	t.Helper()
	f := &fixture{s: s, clock: clock.NewFake(start), orgID: transition.NewID()}
	a := &transition.Applier{Store: s, Clock: f.clock}
	f.svc = auth.NewTokenService(s, a, f.clock, &access.Resolver{Store: s})
	f.authn = auth.NewAuthenticator(s, f.clock, "", []string{"root"}, auth.OIDCConfig{}) // root is a platform admin (its tokens are capped by that)
	ms := start.UnixMilli()
	batch := []store.Statement{store.Stmt(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES (?, 'acme', 'Acme', ?, ?, 1)`, f.orgID, ms, ms)}
	for sub, role := range map[string]string{"vera": "viewer", "max": "member", "ada": "admin"} {
		batch = append(batch, store.Stmt(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version) VALUES (?, '', ?, ?, ?, ?, 1)`,
			f.orgID, sub, role, ms, ms))
	}
	if _, err := s.Exec(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) authenticate(secret string) (*auth.Principal, error) {
	return f.authn.Authenticate(context.Background(), "Bearer "+secret)
}

func code(err error) string {
	if err == nil {
		return "ok"
	}
	return apperr.Code(err)
}

func TestTokenLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "ci", Organization: "acme", Role: "viewer", ExpiresIn: "1h", Scopes: []string{"tracker.read"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Secret, auth.TokenPrefix) || c.Kind != auth.KindAPI || c.OrganizationID != f.orgID || c.Role != "viewer" ||
			c.ActingFor != "max" || c.CreatedBy != "max" || c.Subject != "token:"+c.ID {
			t.Fatalf("created %+v", c)
		}
		if want := start.Add(time.Hour); c.ExpiresAt == nil || !c.ExpiresAt.Equal(want) {
			t.Fatalf("expires_at %v, want %v", c.ExpiresAt, want)
		}
		p, err := f.authenticate(c.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != event.ActorService || p.Subject != "token:"+c.ID || p.ActingFor != "max" || p.OrgID != f.orgID || p.Role != "viewer" ||
			p.PlatformAdmin || !p.HasScope("tracker.read") || p.HasScope("runner") {
			t.Fatalf("principal %+v", p)
		}
		// A token cannot create tokens.
		if _, err := f.svc.Create(ctx, p, auth.TokenInput{Name: "x", Organization: "acme", Role: "viewer"}); code(err) != apperr.Forbidden {
			t.Fatalf("token creating a token: %v", err)
		}
		// Expiry on the fake clock: valid until the last millisecond.
		f.clock.Advance(time.Hour - time.Millisecond)
		if _, err := f.authenticate(c.Secret); err != nil {
			t.Fatalf("just before expiry: %v", err)
		}
		f.clock.Advance(time.Millisecond)
		if _, err := f.authenticate(c.Secret); code(err) != apperr.Unauthenticated || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("after expiry: %v", err)
		}
		// Listing: own tokens only; the platform admin sees all.
		other, err := f.svc.Create(ctx, admin, auth.TokenInput{Name: "deploy", Organization: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if want := start.Add(time.Hour + auth.DefaultAPITokenTTL); other.ExpiresAt == nil || !other.ExpiresAt.Equal(want) || other.Role != "admin" {
			t.Fatalf("default expiry/role: %+v", other.Token)
		}
		for _, c := range []struct {
			p    *auth.Principal
			want int
		}{{member, 1}, {admin, 1}, {viewer, 0}, {root, 2}} {
			ts, err := f.svc.List(ctx, c.p, auth.TokenFilter{})
			if err != nil || len(ts) != c.want {
				t.Errorf("%s lists %d tokens (%v), want %d", c.p.Subject, len(ts), err, c.want)
			}
		}
		// Revoking: someone else's token is not found; the creator revokes.
		if err := f.svc.Revoke(ctx, member, other.ID); code(err) != apperr.NotFound {
			t.Fatalf("revoking another's token: %v", err)
		}
		if _, err := f.authenticate(other.Secret); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Revoke(ctx, admin, other.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Revoke(ctx, admin, other.ID); err != nil {
			t.Fatalf("revoking again: %v", err)
		}
		if _, err := f.authenticate(other.Secret); code(err) != apperr.Unauthenticated || err.Error() != "token revoked" {
			t.Fatalf("revoked token: %v", err)
		}
		evs, err := event.List(ctx, s, event.Filter{EntityType: "token", EntityID: other.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Type != "token.created" || evs[1].Type != "token.revoked" || evs[1].ActorSub != "ada" || evs[1].OrganizationID != f.orgID {
			t.Fatalf("events %+v", evs)
		}
		ts, _ := f.svc.List(ctx, root, auth.TokenFilter{})
		for _, tk := range ts {
			if tk.ID == other.ID && (tk.RevokedAt == nil || tk.Version != 2) {
				t.Errorf("listed revoked token %+v", tk)
			}
		}
	})
}

// TestTokenRules checks who may create which token.
func TestTokenRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		for _, c := range []struct {
			name string
			p    *auth.Principal
			in   auth.TokenInput
			want string // code, or "ok"
			role string // the role the token gets
		}{
			{"viewer as viewer", viewer, auth.TokenInput{Name: "t", Organization: "acme", Role: "viewer"}, "ok", "viewer"},
			{"viewer default role", viewer, auth.TokenInput{Name: "t", Organization: "acme"}, "ok", "viewer"},
			{"viewer above", viewer, auth.TokenInput{Name: "t", Organization: "acme", Role: "member"}, apperr.Forbidden, ""},
			{"member below", member, auth.TokenInput{Name: "t", Organization: f.orgID, Role: "viewer"}, "ok", "viewer"},
			{"member above", member, auth.TokenInput{Name: "t", Organization: "acme", Role: "admin"}, apperr.Forbidden, ""},
			{"admin", admin, auth.TokenInput{Name: "t", Organization: "acme", Role: "admin"}, "ok", "admin"},
			{"admin platform_admin", admin, auth.TokenInput{Name: "t", Role: "platform_admin"}, apperr.Forbidden, ""},
			{"admin runner", admin, auth.TokenInput{Name: "t", Kind: "runner"}, apperr.Forbidden, ""},
			{"stranger", nobody, auth.TokenInput{Name: "t", Organization: "acme"}, apperr.NotFound, ""},
			{"unknown org", admin, auth.TokenInput{Name: "t", Organization: "nope"}, apperr.NotFound, ""},
			{"no organization", admin, auth.TokenInput{Name: "t"}, apperr.Invalid, ""},
			{"platform no organization", root, auth.TokenInput{Name: "t"}, apperr.Invalid, ""},
			{"platform in org", root, auth.TokenInput{Name: "t", Organization: "acme"}, "ok", "admin"},
			{"platform_admin", root, auth.TokenInput{Name: "t", Role: "platform_admin"}, "ok", "platform_admin"},
			{"platform_admin with org", root, auth.TokenInput{Name: "t", Organization: "acme", Role: "platform_admin"}, apperr.Invalid, ""},
			{"runner", root, auth.TokenInput{Name: "r", Kind: "runner"}, "ok", ""},
			{"runner with org", root, auth.TokenInput{Name: "r", Kind: "runner", Organization: "acme"}, apperr.Invalid, ""},
			{"run", root, auth.TokenInput{Name: "r", Kind: "run"}, apperr.Invalid, ""},
			{"bad kind", root, auth.TokenInput{Name: "r", Kind: "god"}, apperr.Invalid, ""},
			{"bad role", admin, auth.TokenInput{Name: "t", Organization: "acme", Role: "owner"}, apperr.Invalid, ""},
			{"no name", admin, auth.TokenInput{Organization: "acme"}, apperr.Invalid, ""},
			{"too long", admin, auth.TokenInput{Name: "t", Organization: "acme", ExpiresIn: "8761h"}, apperr.Invalid, ""},
			{"negative", admin, auth.TokenInput{Name: "t", Organization: "acme", ExpiresIn: "-1h"}, apperr.Invalid, ""},
			{"not a duration", admin, auth.TokenInput{Name: "t", Organization: "acme", ExpiresIn: "soon"}, apperr.Invalid, ""},
			{"bad scope", admin, auth.TokenInput{Name: "t", Organization: "acme", Scopes: []string{"Bad Scope"}}, apperr.Invalid, ""},
			{"service principal", &auth.Principal{Kind: event.ActorService, Subject: "token:x", TokenID: "x", TokenKind: auth.KindAPI, PlatformAdmin: true, Role: "platform_admin"},
				auth.TokenInput{Name: "t", Role: "platform_admin"}, apperr.Forbidden, ""},
		} {
			got, err := f.svc.Create(ctx, c.p, c.in)
			if code(err) != c.want {
				t.Errorf("%s: %v, want %s", c.name, err, c.want)
				continue
			}
			if err == nil && got.Role != c.role {
				t.Errorf("%s: role %q, want %q", c.name, got.Role, c.role)
			}
		}
		// Field names in 400s.
		_, err := f.svc.Create(ctx, admin, auth.TokenInput{Kind: "run", ExpiresIn: "soon", Scopes: []string{"x", "x"}})
		var ae *apperr.Error
		if !errors.As(err, &ae) {
			t.Fatalf("err %v", err)
		}
		fields := map[string]bool{}
		for _, d := range ae.FieldErrors() {
			fields[d.Field] = true
		}
		for _, want := range []string{"name", "kind", "expires_in", "scopes[1]"} {
			if !fields[want] {
				t.Errorf("400 does not name %s: %+v", want, ae.Details)
			}
		}
	})
}

// TestRunnerAndPlatformTokens: a runner token holds no role anywhere and
// does not expire by default; a platform_admin token is a platform admin.
func TestRunnerAndPlatformTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		r, err := f.svc.Create(ctx, root, auth.TokenInput{Name: "runner-1", Kind: "runner"})
		if err != nil {
			t.Fatal(err)
		}
		if r.ExpiresAt != nil || len(r.Scopes) != 1 || r.Scopes[0] != auth.ScopeRunner {
			t.Fatalf("runner token %+v", r.Token)
		}
		f.clock.Advance(10 * 365 * 24 * time.Hour)
		p, err := f.authenticate(r.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if !p.HasScope(auth.ScopeRunner) || p.PlatformAdmin {
			t.Fatalf("runner principal %+v", p)
		}
		res := &access.Resolver{Store: s}
		if err := res.Check(ctx, p, access.TrackerRead, f.orgID, ""); code(err) != apperr.NotFound {
			t.Fatalf("runner reading acme: %v", err)
		}
		pa, err := f.svc.Create(ctx, root, auth.TokenInput{Name: "ops", Role: auth.RolePlatformAdmin, ExpiresIn: "24h"})
		if err != nil {
			t.Fatal(err)
		}
		pp, err := f.authenticate(pa.Secret)
		if err != nil || !pp.PlatformAdmin {
			t.Fatalf("platform_admin token: %+v, %v", pp, err)
		}
		if ts, err := f.svc.List(ctx, pp, auth.TokenFilter{Kind: auth.KindRunner}); err != nil || len(ts) != 1 || ts[0].ID != r.ID {
			t.Fatalf("platform token lists runner tokens: %+v, %v", ts, err)
		}
	})
}

// TestConcurrentRevoke: two revocations at once record one event.
func TestConcurrentRevoke(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		c, err := f.svc.Create(ctx, admin, auth.TokenInput{Name: "t", Organization: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				p := admin
				if i%2 == 1 {
					p = root
				}
				errs[i] = f.svc.Revoke(ctx, p, c.ID)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		evs, err := event.List(ctx, s, event.Filter{EntityType: "token", EntityID: c.ID})
		if err != nil || len(evs) != 2 {
			t.Fatalf("events %d (%v), want created + one revoked", len(evs), err)
		}
	})
}

// TestTokenOrganizationByIDWins: should an (old) organization's slug equal
// acme's id, a token for "acme's id" is still a token for acme.
func TestTokenOrganizationByIDWins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		if _, err := s.Exec(ctx, store.Stmt(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES (?, ?, 'Shadow', 0, 0, 1)`,
			"00000000-0000-7000-8000-000000000000", f.orgID)); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "ci", Organization: f.orgID, Role: "viewer"})
			if err != nil || c.OrganizationID != f.orgID {
				t.Fatalf("token for acme's id: %+v, %v", c, err)
			}
		}
	})
}

// TestRunnerAndRunTokensDieWithTheirIssuer: a runner token acts only while
// its creator is a platform admin; a run token only while the runner token
// that leased its run is valid (not revoked, expired or void), and never
// past that token's expiry.
func TestRunnerAndRunTokensDieWithTheirIssuer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		// demoted is Core after root left platform_admins.
		demoted := auth.NewAuthenticator(s, f.clock, "", nil, auth.OIDCConfig{})
		runExp := start.Add(7 * 24 * time.Hour)
		// pair issues a runner token (expiring in 2h) and a run token
		// leased with it, as run.Service.Lease does.
		pair := func() (runner auth.CreatedToken, run string) {
			t.Helper()
			r, err := f.svc.Create(ctx, root, auth.TokenInput{Name: "runner", Kind: "runner", ExpiresIn: "2h"})
			if err != nil {
				t.Fatal(err)
			}
			rp, err := f.authenticate(r.Secret)
			if err != nil {
				t.Fatal(err)
			}
			secret, _, tr := auth.Issue(rp.Actor(), auth.KindRun, "run x", f.orgID, "", []string{"run:x"}, &runExp, f.clock.Now())
			if err := (&transition.Applier{Store: s, Clock: f.clock}).Apply(ctx, tr); err != nil {
				t.Fatal(err)
			}
			return r, secret
		}
		void := func(what, run string, a *auth.Authenticator) {
			t.Helper()
			if _, err := a.Authenticate(ctx, "Bearer "+run); code(err) != apperr.Unauthenticated || !strings.Contains(err.Error(), "runner token") {
				t.Errorf("run token after %s: %v", what, err)
			}
		}

		r, run := pair()
		p, err := f.authenticate(run)
		if err != nil {
			t.Fatal(err)
		}
		if !p.ExpiresAt.Equal(*r.ExpiresAt) {
			t.Errorf("run token expires at %v, want its runner token's %v", p.ExpiresAt, *r.ExpiresAt)
		}
		if _, err := demoted.Authenticate(ctx, "Bearer "+r.Secret); code(err) != apperr.Unauthenticated || !strings.Contains(err.Error(), "no longer a platform admin") {
			t.Errorf("runner token of a former platform admin: %v", err)
		}
		void("its runner's creator lost platform admin", run, demoted)
		if err := f.svc.Revoke(ctx, root, r.ID); err != nil {
			t.Fatal(err)
		}
		void("its runner token was revoked", run, f.authn)

		_, run = pair()
		f.clock.Advance(2*time.Hour - time.Millisecond)
		if _, err := f.authenticate(run); err != nil {
			t.Fatalf("run token before its runner token expires: %v", err)
		}
		f.clock.Advance(time.Millisecond)
		void("its runner token expired", run, f.authn)
	})
}

// TestTokenListNewestFirstWithinTheLimit: a person lists only the tokens
// they created, newest first; a limit keeps the newest (more tokens than
// the limit), 0 means 100 and more than 1000 is 1000; a platform admin
// lists everyone's; the kind filters.
func TestTokenListNewestFirstWithinTheLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		var mine []string // newest first
		for i := range 5 {
			f.clock.Advance(time.Second)
			c, err := f.svc.Create(ctx, member, auth.TokenInput{Name: "bot " + strings.Repeat("x", i), Organization: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			mine = append([]string{c.ID}, mine...)
			f.clock.Advance(time.Second)
			if _, err := f.svc.Create(ctx, admin, auth.TokenInput{Name: "ada's", Organization: "acme"}); err != nil {
				t.Fatal(err)
			}
		}
		ids := func(p *auth.Principal, filter auth.TokenFilter) []string {
			t.Helper()
			ts, err := f.svc.List(ctx, p, filter)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, tk := range ts {
				out = append(out, tk.ID)
			}
			return out
		}
		for _, limit := range []int{0, 2, 5, 2000} {
			want := mine
			if limit > 0 && limit < len(mine) {
				want = mine[:limit]
			}
			if got := ids(member, auth.TokenFilter{Limit: limit}); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("limit %d: %v, want %v", limit, got, want)
			}
		}
		if got := ids(root, auth.TokenFilter{}); len(got) != 10 || got[1] != mine[0] {
			t.Errorf("a platform admin lists %v, want all 10, newest first", got)
		}
		if got := ids(member, auth.TokenFilter{Kind: auth.KindRunner}); len(got) != 0 {
			t.Errorf("max's runner tokens: %v", got)
		}
		if got := ids(nobody, auth.TokenFilter{}); len(got) != 0 {
			t.Errorf("a stranger lists %v", got)
		}
		// More than the bounds: 0 is 100, beyond 1000 is 1000.
		var many transition.Transition
		for range 1000 {
			_, _, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: "max"}, auth.KindAPI, "many", f.orgID, "member", nil, nil, f.clock.Now())
			many.Add(*tr)
		}
		if err := (&transition.Applier{Store: s, Clock: f.clock}).Apply(ctx, &many); err != nil {
			t.Fatal(err)
		}
		if got := len(ids(member, auth.TokenFilter{})); got != 100 {
			t.Errorf("the default limit lists %d, want 100", got)
		}
		if got := len(ids(member, auth.TokenFilter{Limit: 2000})); got != 1000 {
			t.Errorf("limit 2000 lists %d, want at most 1000", got)
		}
	})
}

// TestARunTokenExpiresAtTheSoonerOfItsOwnAndItsRunners: a run token is
// valid until its own expiry or its runner token's, whichever comes first,
// and says so (the Knowledge service caches a credential no longer than
// the expiry it is told): a runner token that lives longer, or forever,
// does not lengthen it.
func TestARunTokenExpiresAtTheSoonerOfItsOwnAndItsRunners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := setup(t, s)
		apply := func(tr *transition.Transition) {
			t.Helper()
			if err := (&transition.Applier{Store: s, Clock: f.clock}).Apply(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		runExp := start.Add(time.Hour)
		for _, c := range []struct {
			name      string
			runnerExp *time.Time
		}{
			{"a runner token that expires later", new(start.Add(30 * 24 * time.Hour))},
			{"a runner token that never expires", nil},
		} {
			rootActor := event.Actor{Kind: event.ActorHuman, Sub: "root"}
			runnerSecret, _, tr := auth.Issue(rootActor, auth.KindRunner, "runner", "", "", nil, c.runnerExp, f.clock.Now())
			apply(tr)
			rp, err := f.authenticate(runnerSecret)
			if err != nil {
				t.Fatal(err)
			}
			runSecret, _, tr := auth.Issue(rp.Actor(), auth.KindRun, "run", f.orgID, "", []string{"run:x"}, &runExp, f.clock.Now())
			apply(tr)
			p, err := f.authenticate(runSecret)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !p.ExpiresAt.Equal(runExp) {
				t.Errorf("%s: the run token says it expires at %v, want its own %v", c.name, p.ExpiresAt, runExp)
			}
		}
	})
}
