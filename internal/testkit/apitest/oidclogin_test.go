package apitest_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/oidctest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// oidcLoginEnv starts Core with the browser sign-in through iss (client
// "ballet-ui" with a secret).
func oidcLoginEnv(t *testing.T, s store.Store, iss *oidctest.Issuer) *apitest.Env {
	t.Helper()
	iss.Client("ballet-ui", "ui-secret")
	return apitest.New(t, s, func(c *config.Config) {
		c.Auth.OIDCIssuer, c.Auth.OIDCAudience = iss.URL, iss.Audience
		c.Auth.OIDCClientID, c.Auth.OIDCClientSecret = "ballet-ui", "ui-secret"
		c.Auth.PlatformAdmins = []string{"oidc|root"}
	})
}

// visit follows redirects from url in b, as a browser does, and returns
// the last answer and the URLs it went through; it stops before a request
// to a path stop (returning that URL as the last hop, unrequested).
func visit(t *testing.T, b *apitest.Browser, u, stop string) (*visited, []string) {
	t.Helper()
	var hops []string
	c := *b.Client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		hops = append(hops, req.URL.String())
		if stop != "" && req.URL.Path == stop {
			return http.ErrUseLastResponse
		}
		return nil
	}
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html") // a browser navigating (redirects keep it)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &visited{StatusCode: resp.StatusCode, Body: string(body)}, hops
}

type visited struct {
	StatusCode int
	Body       string
}

// TestOIDCSignIn: the whole authorization code dance with PKCE through a
// real issuer on 127.0.0.1, with a Go client following redirects like a
// browser: Core sends it to the issuer (code, S256 challenge, state,
// nonce), the issuer back with a code, Core exchanges it and starts a
// session, then sends the browser to next. The session is the person's.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcLoginEnv(t, s, iss)
		iss.SignInAs("oidc|root")
		b := e.Browser("")
		resp, hops := visit(t, b, e.URL+"/auth/oidc/login?next=/projects/ACME?x=1", "")
		if len(hops) != 3 || !strings.HasPrefix(hops[0], iss.URL+"/authorize?") || !strings.HasPrefix(hops[1], e.URL+"/auth/oidc/callback?") ||
			hops[2] != e.URL+"/projects/ACME?x=1" || resp.StatusCode != 200 {
			t.Fatalf("the dance went %v, ending %d", hops, resp.StatusCode)
		}
		auth, _ := url.Parse(hops[0])
		q := auth.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" ||
			q.Get("redirect_uri") != e.URL+"/auth/oidc/callback" || q.Get("client_id") != "ballet-ui" || q.Get("response_type") != "code" {
			t.Fatalf("authorization request %v", q)
		}
		var info struct {
			Subject, Name, Kind string
			PlatformAdmin       bool `json:"platform_admin"`
		}
		b.Must(200, "GET", "/api/v1/session", nil).JSON(t, &info)
		if info.Subject != "oidc|root" || info.Name != "oidc|root@example.com" || info.Kind != "human" || !info.PlatformAdmin {
			t.Fatalf("the signed-in person: %+v", info)
		}
		b.Must(201, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"})
		// The code was for one use: replaying the callback gets nothing.
		if r, _ := visit(t, e.Browser(""), hops[1], ""); r.StatusCode != 400 {
			t.Fatalf("a replayed callback in another browser: %d", r.StatusCode)
		}
	})
}

// TestOIDCSignInRefusals: a wrong state, a wrong nonce and a code made for
// another browser's sign-in (its PKCE verifier does not match) start no
// session; next must be a path of Ballet's own.
func TestOIDCSignInRefusals(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcLoginEnv(t, s, iss)
		iss.SignInAs("oidc|ola")
		callback := func(b *apitest.Browser) *url.URL {
			_, hops := visit(t, b, e.URL+"/auth/oidc/login", "/auth/oidc/callback")
			u, _ := url.Parse(hops[len(hops)-1])
			return u
		}
		refused := func(b *apitest.Browser, u *url.URL, what, msg string) {
			t.Helper()
			resp, _ := visit(t, b, u.String(), "")
			if resp.StatusCode != 401 {
				t.Fatalf("%s: callback answered %d", what, resp.StatusCode)
			}
			if b.Session() != "" {
				t.Fatalf("%s: a session was started", what)
			}
			if !strings.Contains(resp.Body, msg) {
				t.Fatalf("%s: the refusal %s does not say %q", what, resp.Body, msg)
			}
		}

		// Wrong state.
		b := e.Browser("")
		u := callback(b)
		q := u.Query()
		q.Set("state", "forged")
		u.RawQuery = q.Encode()
		refused(b, u, "a wrong state", "the state does not match")

		// Another browser's code (a code injected into this sign-in): the
		// verifier this browser's sign-in keeps does not match.
		a, other := e.Browser(""), e.Browser("")
		ua, uo := callback(a), callback(other)
		q = ua.Query()
		q.Set("code", uo.Query().Get("code"))
		ua.RawQuery = q.Encode()
		refused(a, ua, "another sign-in's code", "code_verifier does not match")

		// A wrong nonce in the ID token.
		iss.SignInAs("oidc|ola", oidctest.Claim("nonce", "forged"))
		b = e.Browser("")
		refused(b, callback(b), "a wrong nonce", "nonce does not match")

		// An ID token for another client.
		iss.SignInAs("oidc|ola", oidctest.Audience("someone-else"))
		b = e.Browser("")
		refused(b, callback(b), "another audience", "invalid ID token")

		// No open redirect; no callback without a sign-in in progress.
		for _, next := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "evil"} {
			if r, _ := visit(t, e.Browser(""), e.URL+"/auth/oidc/login?next="+url.QueryEscape(next), ""); r.StatusCode != 400 {
				t.Fatalf("next=%s: %d", next, r.StatusCode)
			}
		}
		if r, _ := visit(t, e.Browser(""), e.URL+"/auth/oidc/callback?code=x&state=y", ""); r.StatusCode != 400 {
			t.Fatalf("a callback without a sign-in: %d", r.StatusCode)
		}

		// And the right one still works.
		iss.SignInAs("oidc|ola")
		b = e.Browser("")
		if r, _ := visit(t, b, e.URL+"/auth/oidc/login", ""); r.StatusCode != 200 || b.Session() == "" {
			t.Fatalf("a good sign-in after the refusals: %d", r.StatusCode)
		}
	})
}
