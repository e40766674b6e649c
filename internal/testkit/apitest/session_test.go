package apitest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// sessionRow reads a session's stored row: ended or not, and whether the
// cookie value itself is stored anywhere (it must not be).
func sessionEnded(t *testing.T, s store.Store, subject string) []bool {
	t.Helper()
	rows, err := s.Query(context.Background(), `SELECT COALESCE(ended_at, 0) FROM sessions WHERE subject = ? ORDER BY created_at, id`, subject)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, rows.Len())
	for i := range out {
		var ended int64
		if err := rows.Scan(i, &ended); err != nil {
			t.Fatal(err)
		}
		out[i] = ended != 0
	}
	return out
}

// TestSessionSignInAndOut: the bootstrap token signs a browser in; the
// HttpOnly, SameSite=Lax cookie then authenticates REST like the token
// (a platform admin creates an organization); only the hash is stored;
// signing out ends the session on the server, so the same cookie value,
// replayed, is refused.
func TestSessionSignInAndOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		b := e.Browser("")
		r := b.SignIn(apitest.BootstrapToken)
		var info struct {
			Subject, Name, Kind string
			PlatformAdmin       bool       `json:"platform_admin"`
			ExpiresAt           *time.Time `json:"expires_at"`
		}
		r.JSON(t, &info)
		if info.Subject != "bootstrap" || info.Kind != "human" || !info.PlatformAdmin || info.ExpiresAt == nil {
			t.Fatalf("sign-in answered %s", r.Body)
		}
		if d := time.Until(*info.ExpiresAt); d < 11*time.Hour || d > 13*time.Hour {
			t.Fatalf("expires_at %s: want session_ttl (12h) from now", info.ExpiresAt)
		}
		set := r.Header.Get("Set-Cookie")
		for _, want := range []string{"ballet_session=ballet-session_", "HttpOnly", "SameSite=Lax", "Path=/"} {
			if !strings.Contains(set, want) {
				t.Fatalf("Set-Cookie %q lacks %q", set, want)
			}
		}
		if strings.Contains(set, "Secure") {
			t.Fatalf("Set-Cookie %q is Secure on an http public_url", set)
		}
		value := b.Session()
		rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM sessions WHERE hash = ? OR hash = ?`, value, "x")
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		_ = rows.Scan(0, &stored)
		if stored != 0 {
			t.Fatal("the session's value is stored in the clear")
		}

		b.Must(200, "GET", "/api/v1/session", nil)
		b.Must(201, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"})
		var bearer struct{ Subject, Kind string }
		e.Must(200, apitest.BootstrapToken, "GET", "/api/v1/session", nil).JSON(t, &bearer)
		if bearer.Subject != "bootstrap" || bearer.Kind != "human" {
			t.Fatalf("GET /session with the bearer: %+v", bearer)
		}

		r = b.Must(204, "DELETE", "/api/v1/session", nil)
		if set := r.Header.Get("Set-Cookie"); !strings.Contains(set, "ballet_session=;") || !strings.Contains(set, "Max-Age=0") {
			t.Fatalf("sign-out's Set-Cookie %q does not clear the cookie", set)
		}
		if got := sessionEnded(t, s, "bootstrap"); len(got) != 1 || !got[0] {
			t.Fatalf("sessions ended after sign-out: %v", got)
		}
		// The old value, replayed (a copy of the cookie), is refused.
		if r := e.Do(value, "GET", "/api/v1/session", nil); r.Status != 401 || !strings.Contains(string(r.Body), "session ended") {
			t.Fatalf("the signed-out session's value: %d %s", r.Status, r.Body)
		}
		if b.Session() != "" {
			t.Fatal("the browser kept the cookie after sign-out")
		}
		b.Must(401, "GET", "/api/v1/session", nil)

		// The cookie carries sessions only: a token put in it is no
		// credential.
		req, _ := http.NewRequest("GET", e.URL+"/api/v1/session", nil)
		req.Header.Set("Cookie", "ballet_session="+apitest.BootstrapToken)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
			t.Fatalf("the bootstrap token as the cookie: %v %v", resp, err)
		}
	})
}

// TestSessionActsAsItsAPIToken: a session started with an admin's API
// token acts as that token (an organization role, capped as ever; no
// tokens minted), and ends when the token is revoked — REST at once, and
// the row says so.
func TestSessionActsAsItsAPIToken(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		org := e.Org("acme")
		e.Org("globex")
		e.Project("acme", "ACME")
		var tk struct{ Token, ID, Subject string }
		e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "ui", "organization": org, "role": "viewer"}).JSON(t, &tk)
		b := e.Browser("")
		var info struct{ Subject, Name, Kind string }
		b.SignIn(tk.Token).JSON(t, &info)
		if info.Subject != tk.Subject || info.Name != "ui" || info.Kind != "service" {
			t.Fatalf("session of an API token: %+v", info)
		}
		b.Must(200, "GET", "/api/v1/projects/ACME/items", nil)
		b.Must(403, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "a viewer"})
		b.Must(404, "GET", "/api/v1/orgs/globex", nil)
		b.Must(403, "POST", "/api/v1/tokens", map[string]any{"name": "minted", "organization": org})

		e.Admin(204, "DELETE", "/api/v1/tokens/"+tk.ID, nil)
		if r := b.Do("GET", "/api/v1/session", nil); r.Status != 401 || !strings.Contains(string(r.Body), "session ended") {
			t.Fatalf("after the token's revocation: %d %s", r.Status, r.Body)
		}
		if got := sessionEnded(t, s, tk.Subject); len(got) != 1 || !got[0] {
			t.Fatalf("the revoked token's sessions, ended: %v", got)
		}
	})
}

// TestSessionRefusesOtherCredentials: a bad token is 401, a runner token
// 403, a session value 400 naming the field, an empty body's token 400.
func TestSessionRefusesOtherCredentials(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		var runner struct{ Token string }
		e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "r", "kind": "runner"}).JSON(t, &runner)
		b := e.Browser("")
		if r := b.Do("POST", "/api/v1/session", map[string]any{"token": "ballet_nope"}); r.Status != 401 {
			t.Fatalf("unknown token: %d %s", r.Status, r.Body)
		}
		if r := b.Do("POST", "/api/v1/session", map[string]any{"token": runner.Token}); r.Status != 403 {
			t.Fatalf("runner token: %d %s", r.Status, r.Body)
		}
		if r := b.Do("POST", "/api/v1/session", map[string]any{"token": ""}); r.Status != 400 || fields(t, r) != "token" {
			t.Fatalf("empty token: %d %s", r.Status, r.Body)
		}
		b.SignIn(apitest.BootstrapToken)
		if r := b.Do("POST", "/api/v1/session", map[string]any{"token": b.Session()}); r.Status != 400 || fields(t, r) != "token" {
			t.Fatalf("a session as the token: %d %s", r.Status, r.Body)
		}
		if b.Session() == "" {
			t.Fatal("a refused sign-in dropped the browser's session")
		}
	})
}

// TestSessionExpires: a session lives session_ttl from sign-in, however
// much it is used (absolute), on Core's clock.
func TestSessionExpires(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		clk := clock.NewFake(time.Now().UTC()) // the cookie jar expires the cookie on the real clock
		e := apitest.NewOn(t, s, clk, func(c *config.Config) { c.Auth.SessionTTL = config.Duration{Duration: time.Hour} })
		b := e.Browser("")
		b.SignIn(apitest.BootstrapToken)
		lastSeen := func() time.Time {
			rows, err := s.Query(context.Background(), `SELECT last_seen_at FROM sessions`)
			if err != nil {
				t.Fatal(err)
			}
			var ms int64
			_ = rows.Scan(0, &ms)
			return time.UnixMilli(ms)
		}
		signedIn := lastSeen()
		b.Must(200, "GET", "/api/v1/session", nil)
		if !lastSeen().Equal(signedIn) {
			t.Fatal("a use within a minute of the last wrote last_seen_at")
		}
		for range 5 { // used all along: still not extended
			clk.Advance(11 * time.Minute)
			b.Must(200, "GET", "/api/v1/session", nil)
		}
		if got := lastSeen().Sub(signedIn); got != 55*time.Minute {
			t.Fatalf("last_seen_at moved by %s, want 55m (the last use)", got)
		}
		clk.Advance(5*time.Minute - time.Millisecond)
		b.Must(200, "GET", "/api/v1/session", nil)
		clk.Advance(time.Millisecond)
		if r := b.Do("GET", "/api/v1/session", nil); r.Status != 401 || !strings.Contains(string(r.Body), "session expired") {
			t.Fatalf("after session_ttl: %d %s", r.Status, r.Body)
		}
	})
}

// TestSessionCSRF: a write another site's page makes with the person's
// cookie is refused with 403 in the API's shape and changes nothing (the
// database has no such organization); the same write from Ballet's own
// page works; a bearer is not affected whatever its Origin; a sign-in
// from another site is refused too.
func TestSessionCSRF(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		b := e.Browser("")
		b.SignIn(apitest.BootstrapToken)
		evil := b.From("http://evil.example")
		r := evil.Do("POST", "/api/v1/orgs", map[string]any{"slug": "evil", "name": "Evil"})
		if r.Status != 403 || r.ErrorCode() != "forbidden" || !strings.Contains(string(r.Body), "cross-origin") {
			t.Fatalf("cross-origin write: %d %s", r.Status, r.Body)
		}
		rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM organizations WHERE slug = 'evil'`)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		_ = rows.Scan(0, &n)
		if n != 0 {
			t.Fatal("the cross-origin write created the organization")
		}
		// Without Sec-Fetch-Site (an older browser), Origin alone decides.
		req, _ := http.NewRequest("DELETE", e.URL+"/api/v1/session", nil)
		req.Header.Set("Origin", "http://evil.example")
		resp, err := b.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 || b.Session() == "" {
			t.Fatalf("cross-origin sign-out by Origin alone: %d", resp.StatusCode)
		}
		// A cross-origin read is allowed (the browser keeps its answer from
		// the other site's page).
		evil.Must(200, "GET", "/api/v1/session", nil)
		b.Must(201, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"})
		req, _ = http.NewRequest("POST", e.URL+"/api/v1/orgs", strings.NewReader(`{"slug":"bearer","name":"Bearer"}`))
		req.Header.Set("Authorization", "Bearer "+apitest.BootstrapToken)
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
			t.Fatalf("a bearer write with a foreign Origin: %v %v", resp, err)
		}
		if r := e.Browser("http://evil.example").Do("POST", "/api/v1/session", map[string]any{"token": apitest.BootstrapToken}); r.Status != 403 {
			t.Fatalf("cross-origin sign-in: %d %s", r.Status, r.Body)
		}
	})
}

// TestSessionRealtime: the WebSocket takes the session cookie from
// Ballet's own page, refuses it from another origin (403, before any
// upgrade), and closes when the session is signed out — at once, not at
// the next periodic re-check (an hour away here).
func TestSessionRealtime(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.Events.AuthRecheck = config.Duration{Duration: time.Hour} })
		e.Org("acme")
		e.Project("acme", "ACME")
		b := e.Browser("")
		b.SignIn(apitest.BootstrapToken)
		ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
		defer cancel()
		dial := func(origin string) (*realtime.Client, error) {
			return realtime.Dial(ctx, e.URL, "", &realtime.DialOptions{HTTPClient: b.Client, Header: http.Header{"Origin": {origin}}})
		}
		_, err := dial("http://evil.example")
		var he *realtime.HandshakeError
		if !errors.As(err, &he) || he.Status != 403 {
			t.Fatalf("a foreign page's handshake with the cookie: %v", err)
		}
		c, err := dial(e.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sub, err := c.Subscribe(ctx, "project:ACME", 0)
		if err != nil {
			t.Fatal(err)
		}
		apitest.Receive(t, sub.C(), "the replay")
		b.Must(204, "DELETE", "/api/v1/session", nil)
		for {
			select {
			case _, ok := <-sub.C():
				if !ok {
					if e := sub.Err(); e == nil || !strings.Contains(e.Error(), "no longer valid") {
						t.Fatalf("the subscription ended with %v", e)
					}
					return
				}
			case <-ctx.Done():
				t.Fatal("the signed-out session's subscription did not end")
			}
		}
	})
}

// TestProjectPermissions: each caller gets exactly the permissions Check
// would grant it in the project; a token's scopes narrow them; a stranger
// gets the project's 404.
func TestProjectPermissions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		org := e.Org("acme")
		e.Org("globex")
		e.Project("acme", "ACME")
		perms := func(token string) string {
			var out struct{ Permissions []string }
			e.Must(200, token, "GET", "/api/v1/projects/ACME/permissions", nil).JSON(t, &out)
			return strings.Join(out.Permissions, " ")
		}
		for token, want := range map[string]string{
			e.RoleToken(org, "viewer"): "tracker.read",
			e.RoleToken(org, "member"): "tracker.read tracker.write run.manage",
			e.RoleToken(org, "admin"):  "tracker.read tracker.write run.manage project.update member.manage",
			apitest.BootstrapToken:     "tracker.read tracker.write run.manage project.update member.manage platform.admin",
		} {
			if got := perms(token); got != want {
				t.Errorf("permissions %q, want %q", got, want)
			}
		}
		var tk struct{ Token string }
		e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "scoped", "organization": org, "role": "admin",
			"scopes": []string{"tracker.read", "project.update"}}).JSON(t, &tk)
		if got := perms(tk.Token); got != "tracker.read project.update" {
			t.Errorf("scoped token's permissions %q", got)
		}
		var other struct{ ID string }
		e.Admin(200, "GET", "/api/v1/orgs/globex", nil).JSON(t, &other)
		e.Must(404, e.RoleToken(other.ID, "admin"), "GET", "/api/v1/projects/ACME/permissions", nil)
	})
}

// TestSessionBehindAProxy: with an https [http] public_url (Core behind a
// proxy), the cookie is Secure, and a page of that origin may write with
// it although the Host Core sees is another.
func TestSessionBehindAProxy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.HTTP.PublicURL = "https://ballet.example.com" })
		r := e.Browser("").Do("POST", "/api/v1/session", map[string]any{"token": apitest.BootstrapToken})
		set := r.Header.Get("Set-Cookie")
		if r.Status != 201 || !strings.Contains(set, "; Secure") {
			t.Fatalf("sign-in behind https: %d, Set-Cookie %q", r.Status, set)
		}
		value := strings.TrimPrefix(strings.Split(set, ";")[0], "ballet_session=")
		write := func(origin string) int {
			req, _ := http.NewRequest("POST", e.URL+"/api/v1/orgs", strings.NewReader(`{"slug":"acme","name":"Acme"}`))
			req.Header.Set("Cookie", "ballet_session="+value)
			req.Header.Set("Origin", origin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if st := write("https://evil.example.com"); st != 403 {
			t.Fatalf("a foreign page's write: %d", st)
		}
		if st := write("https://ballet.example.com"); st != 201 {
			t.Fatalf("the public origin's page's write: %d", st)
		}
		// The WebSocket likewise.
		ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
		defer cancel()
		dial := func(origin string) error {
			c, err := realtime.Dial(ctx, e.URL, "", &realtime.DialOptions{Header: http.Header{"Origin": {origin}, "Cookie": {"ballet_session=" + value}}})
			if err == nil {
				c.Close()
			}
			return err
		}
		if err := dial("https://ballet.example.com"); err != nil {
			t.Fatalf("the public origin's page's WebSocket: %v", err)
		}
		if err := dial("https://evil.example.com"); err == nil {
			t.Fatal("a foreign page's WebSocket with the cookie was accepted")
		}
	})
}

// TestSessionThroughTheKnowledgeProxy: a signed-in browser's requests under
// /api/v1/knowledge reach the Knowledge service with the session's value
// as the bearer and no cookie; another site's write with the cookie is
// refused at Core and never reaches the service.
func TestSessionThroughTheKnowledgeProxy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		var mu sync.Mutex
		var got []string
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Method+" "+r.Header.Get("Authorization")+" cookie="+r.Header.Get("Cookie"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"spaces":[]}`))
		}))
		defer svc.Close()
		e := apitest.New(t, s, func(c *config.Config) { c.Knowledge.URL = svc.URL })
		b := e.Browser("")
		b.SignIn(apitest.BootstrapToken)
		b.Must(200, "GET", "/api/v1/knowledge/orgs/acme/spaces", nil)
		if r := b.From("http://evil.example").Do("POST", "/api/v1/knowledge/orgs/acme/spaces", map[string]any{"name": "x"}); r.Status != 403 {
			t.Fatalf("a cross-origin write through the proxy: %d %s", r.Status, r.Body)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := "GET Bearer " + b.Session() + " cookie="; len(got) != 1 || got[0] != want {
			t.Fatalf("the service saw %q, want [%q]", got, want)
		}
	})
}
