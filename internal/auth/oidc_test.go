package auth_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/testkit/oidctest"
)

// signIn runs a sign-in through the issuer: Begin, the browser's visit to
// the authorization URL (whose answer is a redirect back with a code and
// the state), Finish.
func signIn(t *testing.T, f *auth.CodeFlow) (*auth.Principal, error) {
	t.Helper()
	ctx := context.Background()
	u, pend, err := f.Begin(ctx, "/needs-me")
	if err != nil {
		t.Fatal(err)
	}
	state, code := visit(t, u)
	return f.Finish(ctx, pend, state, code)
}

// visit follows an authorization URL as a browser would, up to the
// redirect back: the state and code it carries.
func visit(t *testing.T, u string) (state, code string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil {
		t.Fatalf("authorization answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back.Query().Get("state"), back.Query().Get("code")
}

// TestTheCodeFlowSignsInThePersonTheIssuerApproved: a sign-in asks the
// issuer for openid, profile and email with PKCE (S256), a state and a
// nonce; what comes back is the approved subject, named by its name, else
// its email, else its subject, a platform admin only when listed; a
// confidential client authenticates with its secret in the header, a
// public one sends its id alone.
func TestTheCodeFlowSignsInThePersonTheIssuerApproved(t *testing.T) {
	iss := oidctest.New(t)
	authn := auth.NewAuthenticator(nil, clock.Real{}, "", []string{"root"}, auth.OIDCConfig{Issuer: iss.URL, Audience: "ballet-web"})
	f := &auth.CodeFlow{Auth: authn, ClientID: "ballet-web", ClientSecret: "web-secret", RedirectURL: "https://ballet.example/auth/oidc/callback"}
	iss.Client("ballet-web", "web-secret")

	u, pend, err := f.Begin(context.Background(), "/needs-me")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(u)
	got := q.Query()
	if got.Get("scope") != "openid profile email" || got.Get("client_id") != "ballet-web" || got.Get("state") != pend.State || got.Get("nonce") != pend.Nonce ||
		got.Get("code_challenge_method") != "S256" || got.Get("redirect_uri") != f.RedirectURL || pend.Next != "/needs-me" || pend.State == pend.Nonce {
		t.Errorf("Begin = %s, %+v", u, pend)
	}

	for _, c := range []struct {
		subject string
		opts    []oidctest.Option
		name    string
		admin   bool
	}{
		{"olga", []oidctest.Option{oidctest.Claim("name", "Olga Ortiz")}, "Olga Ortiz", false},
		{"olga", nil, "olga@example.com", false},
		{"olga", []oidctest.Option{oidctest.Claim("email", "")}, "olga", false},
		{"root", nil, "root@example.com", true},
	} {
		iss.SignInAs(c.subject, c.opts...)
		p, err := signIn(t, f)
		if err != nil || p.Subject != c.subject || p.Name != c.name || p.PlatformAdmin != c.admin || p.Kind != "human" {
			t.Errorf("sign in as %s: %+v, %v; want named %q, platform admin %v", c.subject, p, err, c.name, c.admin)
		}
	}
	// The address is the person's notification address only when the
	// issuer vouches for it (email_verified true).
	for _, c := range []struct {
		opts []oidctest.Option
		want string
	}{
		{[]oidctest.Option{oidctest.Claim("email_verified", true)}, "olga@example.com"},
		{[]oidctest.Option{oidctest.Claim("email_verified", false)}, ""},
		{nil, ""},
	} {
		iss.SignInAs("olga", c.opts...)
		if p, err := signIn(t, f); err != nil || p.VerifiedEmail != c.want {
			t.Errorf("sign in with %d options: verified email %q, %v; want %q", len(c.opts), p.VerifiedEmail, err, c.want)
		}
	}
	if got := iss.ClientAuth(); len(got) != 7 || slices.ContainsFunc(got, func(s string) bool { return s != "basic" }) {
		t.Errorf("a confidential client authenticated with %v, want basic every time", got)
	}

	iss.Client("ballet-public", "")
	pub := &auth.CodeFlow{Auth: authn, ClientID: "ballet-public", RedirectURL: f.RedirectURL}
	iss.SignInAs("olga")
	if p, err := signIn(t, pub); err != nil || p.Subject != "olga" {
		t.Errorf("a public client: %+v, %v", p, err)
	}
	if got := iss.ClientAuth(); got[len(got)-1] != "post" {
		t.Errorf("a public client authenticated with %v, want its id in the form", got)
	}
}

// TestTheCodeFlowRefusesWhatItDidNotStart: the sign-in is refused for a
// state that is not the one this browser started (or none), no code, a
// code used already, an ID token with another nonce, an expired one, or
// the bootstrap subject; a path to return to that is not Ballet's own is
// refused before the issuer is asked.
func TestTheCodeFlowRefusesWhatItDidNotStart(t *testing.T) {
	ctx := context.Background()
	iss := oidctest.New(t)
	authn := auth.NewAuthenticator(nil, clock.Real{}, "", nil, auth.OIDCConfig{Issuer: iss.URL, Audience: "ballet-web"})
	f := &auth.CodeFlow{Auth: authn, ClientID: "ballet-web", ClientSecret: "web-secret", RedirectURL: "https://ballet.example/cb"}
	iss.Client("ballet-web", "web-secret")
	iss.SignInAs("olga")

	u, pend, err := f.Begin(ctx, "")
	if err != nil || pend.Next != "/" {
		t.Fatalf("Begin without a path: %+v %v", pend, err)
	}
	state, code := visit(t, u)
	for _, c := range []struct {
		name        string
		pend        auth.Pending
		state, code string
		why         string
	}{
		{"another state", pend, state + "x", code, "state does not match"},
		{"no state kept", auth.Pending{}, "", code, "state does not match"},
		{"no code", pend, state, "", "no code"},
	} {
		p, err := f.Finish(ctx, c.pend, c.state, c.code)
		wantUnauthenticated(t, c.name, p, err, c.why)
	}
	if p, err := f.Finish(ctx, pend, state, code); err != nil || p.Subject != "olga" {
		t.Fatalf("the sign-in itself: %+v %v", p, err)
	}
	before := len(iss.ClientAuth())
	p, err := f.Finish(ctx, pend, state, code)
	wantUnauthenticated(t, "the code again", p, err, "did not exchange the code")
	if tries := iss.ClientAuth()[before:]; len(tries) != 1 {
		t.Errorf("a refused exchange was tried %d times (%v), want once: the issuer has spent the code", len(tries), tries)
	}

	for _, c := range []struct {
		name, subject string
		opts          []oidctest.Option
		why           string
	}{
		{"another nonce", "olga", []oidctest.Option{oidctest.Claim("nonce", "not-this-one")}, "nonce does not match"},
		{"an expired ID token", "olga", []oidctest.Option{oidctest.Expired()}, "invalid ID token"},
		{"the bootstrap subject", auth.BootstrapSubject, nil, "cannot sign in"},
	} {
		iss.SignInAs(c.subject, c.opts...)
		p, err := signIn(t, f)
		wantUnauthenticated(t, c.name, p, err, c.why)
	}
	if _, _, err := f.Begin(ctx, "https://evil.example/"); apperr.Code(err) != apperr.Invalid {
		t.Errorf("Begin to another site: %v, want invalid", err)
	}
}

// TestTheIssuerIsFoundOnFirstUse: with the issuer down, signing in and
// identity tokens answer unavailable (Core runs meanwhile); once it is up
// they work, without a restart.
func TestTheIssuerIsFoundOnFirstUse(t *testing.T) {
	ctx := context.Background()
	iss := oidctest.New(t)
	iss.Client("ballet-web", "")
	iss.SignInAs("olga")
	iss.Stop()
	authn := auth.NewAuthenticator(nil, clock.Real{}, "", nil, auth.OIDCConfig{Issuer: iss.URL, Audience: oidctest.DefaultAudience})
	f := &auth.CodeFlow{Auth: authn, ClientID: "ballet-web", RedirectURL: "https://ballet.example/cb"}
	if _, _, err := f.Begin(ctx, "/"); apperr.Code(err) != apperr.Unavailable {
		t.Errorf("Begin with the issuer down: %v, want unavailable", err)
	}
	if _, err := f.Finish(ctx, auth.Pending{State: "s"}, "s", "code"); apperr.Code(err) != apperr.Unavailable {
		t.Errorf("Finish with the issuer down: %v, want unavailable", err)
	}
	token := iss.Token(t, "olga")
	if _, err := authn.Authenticate(ctx, "Bearer "+token); apperr.Code(err) != apperr.Unavailable {
		t.Errorf("an identity token with the issuer down: %v, want unavailable", err)
	}
	iss.Start()
	if p, err := signIn(t, f); err != nil || p.Subject != "olga" {
		t.Errorf("a sign-in once the issuer is up: %+v %v", p, err)
	}
	if p, err := authn.Authenticate(ctx, "Bearer "+token); err != nil || p.Subject != "olga" {
		t.Errorf("an identity token once the issuer is up: %+v %v", p, err)
	}
}

// TestIdentityTokensActAsTheirSubject: a verified identity token acts as
// its subject until its expiry, named by its name, else its email, else
// its subject; a token for another audience, an expired one, one for the
// bootstrap subject or one without a subject is refused, and without an
// issuer configured none is accepted.
func TestIdentityTokensActAsTheirSubject(t *testing.T) {
	ctx := context.Background()
	iss := oidctest.New(t)
	authn := auth.NewAuthenticator(nil, clock.Real{}, "", []string{"root"}, auth.OIDCConfig{Issuer: iss.URL, Audience: oidctest.DefaultAudience})
	for _, c := range []struct {
		subject string
		opts    []oidctest.Option
		name    string
		admin   bool
	}{
		{"olga", []oidctest.Option{oidctest.Claim("name", "Olga Ortiz"), oidctest.Claim("email", "o@example.com")}, "Olga Ortiz", false},
		{"olga", []oidctest.Option{oidctest.Claim("email", "o@example.com")}, "o@example.com", false},
		{"root", nil, "root", true},
	} {
		token := iss.Token(t, c.subject, c.opts...)
		p, err := authn.Authenticate(ctx, "Bearer "+token)
		claims, _ := oidctest.Claims(token)
		exp := time.Unix(int64(claims["exp"].(float64)), 0).UTC()
		if err != nil || p.Subject != c.subject || p.Name != c.name || p.PlatformAdmin != c.admin || !p.ExpiresAt.Equal(exp) || p.TokenID != "" {
			t.Errorf("%s: %+v, %v; want named %q, admin %v, expiring %s", c.subject, p, err, c.name, c.admin, exp)
		}
	}
	for _, c := range []struct {
		name, subject string
		opts          []oidctest.Option
		why           string
	}{
		{"another audience", "olga", []oidctest.Option{oidctest.Audience("elsewhere")}, "invalid identity token"},
		{"expired", "olga", []oidctest.Option{oidctest.Expired()}, "invalid identity token"},
		{"the bootstrap subject", auth.BootstrapSubject, nil, "reserved for the bootstrap token"},
		{"no subject", "", nil, "no subject"},
	} {
		p, err := authn.Authenticate(ctx, "Bearer "+iss.Token(t, c.subject, c.opts...))
		wantUnauthenticated(t, c.name, p, err, c.why)
	}
	none := auth.NewAuthenticator(nil, clock.Real{}, "", nil, auth.OIDCConfig{})
	p, err := none.Authenticate(ctx, "Bearer "+iss.Token(t, "olga"))
	wantUnauthenticated(t, "no issuer configured", p, err, "no OIDC issuer is configured")
	if strings.Count(iss.Token(t, "x"), ".") != 2 {
		t.Fatal("a JWT has three parts")
	}
}
