package apitest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// The probes of each door beyond the route sweep (probe_test.go): the
// headers every answer carries, the browser session, the runner protocol,
// the realtime streams, MCP and the forges' webhooks.

// TestProbeAnswersAreNeverCachedOrSniffed: every answer of the API — on
// every route of the table, a success or an error, to a credential or to
// none — carries Cache-Control: no-store (an answer may hold a token, a
// run token or a person's data: no browser or proxy cache may keep it)
// and X-Content-Type-Options: nosniff (no JSON answer is ever read as
// HTML or script), and is never framed. So do the doors beside the table:
// an unknown API path, the Knowledge proxy, the realtime handshake, the
// OpenAPI document, the probes and the metrics. The web UI's page carries
// its CSP (frame-ancestors 'none'), X-Frame-Options, nosniff and
// Referrer-Policy.
func TestProbeAnswersAreNeverCachedOrSniffed(t *testing.T) {
	w := newProbeWorld(t)
	check := func(what string, r *apitest.Response) {
		t.Helper()
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s (%d): Cache-Control %q, want no-store", what, r.Status, got)
		}
		if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options %q, want nosniff", what, r.Status, got)
		}
		if got := r.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s (%d): X-Frame-Options %q, want DENY", what, r.Status, got)
		}
	}
	for _, rt := range w.Core.API.Routes() {
		path := w.path(rt, w.values)
		r := w.send(probeReq{method: rt.Method, path: path})
		check(fmt.Sprintf("%s %s without a credential", rt.Method, rt.Path), r)
		if rt.Method == "GET" {
			r := w.send(probeReq{method: "GET", path: path, auth: "Bearer " + apitest.BootstrapToken})
			check(fmt.Sprintf("GET %s as the platform admin", rt.Path), r)
		}
	}
	// The answers that carry a secret.
	check("POST /api/v1/tokens (the new token)", w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "cached?", "kind": "runner"}))
	check("POST /api/v1/session (the cookie)", w.Must(201, "", "POST", "/api/v1/session", map[string]any{"token": w.admin}))
	createItem(w.Env, "ACME", map[string]any{"type": "task", "title": "Leased"})
	queueRun(w.Env, "ACME-3")
	check("POST /api/v1/runners/{runner}/lease (the run token)",
		w.Must(200, w.runner.Token, "POST", "/api/v1/runners/"+w.runner.ID+"/lease", map[string]any{}))
	for _, p := range []string{"/api/v1/nope", "/api/v1/openapi.json", "/api/v1/knowledge/orgs/acme/spaces", "/api/v1/realtime",
		"/healthz", "/readyz", "/metrics", "/auth/login"} {
		check("GET "+p, w.send(probeReq{method: "GET", path: p, auth: "Bearer " + apitest.BootstrapToken}))
	}
	page := w.send(probeReq{method: "GET", path: "/projects/ACME", header: http.Header{"Accept": {"text/html"}}})
	if page.Status != 200 {
		t.Fatalf("the UI's page: %d", page.Status)
	}
	for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"} {
		if got := page.Header.Get(h); got != want {
			t.Errorf("the UI's page: %s %q, want %q", h, got, want)
		}
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
		!strings.Contains(csp, "object-src 'none'") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
		t.Errorf("the UI's page: Content-Security-Policy %q", csp)
	}
}

// TestProbeBrowserSession: the session cookie is HttpOnly, SameSite=Lax,
// Path=/ and not Secure on http (Secure on https: TestSessionBehindAProxy);
// a cookie the browser already had is never adopted (a fresh value at
// each sign-in: no fixation); every state-changing route of the table,
// sent with the cookie from another site's page (with Origin, with only
// Sec-Fetch-Site, or with Origin null), is a 403 that changes nothing;
// signing out ends the session on the server, so the stolen value is
// worth nothing after; runner and run tokens cannot start one.
func TestProbeBrowserSession(t *testing.T) {
	w := newProbeWorld(t)
	b := w.Browser("")
	planted := &http.Cookie{Name: "ballet_session", Value: "ballet-session_planted-by-an-attacker-0123456789abcdef", Path: "/"}
	u := mustURL(t, w.URL)
	b.Client.Jar.SetCookies(u, []*http.Cookie{planted})
	r := b.SignIn(w.admin)
	var c *http.Cookie
	for _, x := range (&http.Response{Header: r.Header}).Cookies() {
		if x.Name == "ballet_session" {
			c = x
		}
	}
	switch {
	case c == nil:
		t.Fatal("no session cookie set")
	case !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure:
		t.Errorf("session cookie flags: HttpOnly %v SameSite %v Path %q Secure %v", c.HttpOnly, c.SameSite, c.Path, c.Secure)
	case c.Value == planted.Value || !strings.HasPrefix(c.Value, "ballet-session_"):
		t.Errorf("the session value is the planted one or not a session: %q", c.Value)
	}
	value := b.Session()
	w.secrets = append(w.secrets, value)
	b.Must(200, "GET", "/api/v1/session", nil)

	// Every write of the table from another site's page, with the cookie.
	evil := b.From("https://evil.example")
	for _, rt := range w.Core.API.Routes() {
		if rt.Method == "GET" || rt.Method == "HEAD" {
			continue
		}
		path := w.path(rt, w.values)
		for _, hdr := range []http.Header{
			{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}},
			{"Sec-Fetch-Site": {"cross-site"}},
			{"Origin": {"null"}},
			{"Origin": {"https://evil.example"}},
			{"Sec-Fetch-Site": {"same-site"}, "Origin": {"http://sub.127.0.0.1"}},
		} {
			hdr.Set("Cookie", "ballet_session="+value)
			r := w.send(probeReq{method: rt.Method, path: path, body: []byte(`{}`), contentType: "application/json", header: hdr})
			if r.Status != 403 {
				t.Errorf("%s %s with the cookie, %v: %d, want 403: %.200s", rt.Method, rt.Path, hdr, r.Status, r.Body)
			}
		}
	}
	evil.Must(403, "DELETE", "/api/v1/session", nil)
	b.Must(200, "GET", "/api/v1/session", nil) // still signed in: the forged sign-out did nothing

	// Runner and run tokens start no session.
	for name, tok := range map[string]string{"runner token": w.runner.Token, "run token": w.leased.Token} {
		if r := w.Do("", "POST", "/api/v1/session", map[string]any{"token": tok}); r.Status != 403 {
			t.Errorf("sign in with a %s: %d, want 403: %s", name, r.Status, r.Body)
		}
	}
	// A session value is no token to start another session with.
	if r := w.Do("", "POST", "/api/v1/session", map[string]any{"token": value}); r.Status != 400 {
		t.Errorf("sign in with a session value: %d, want 400: %s", r.Status, r.Body)
	}

	// Signing out ends it on the server: the value, replayed, is refused
	// (as a cookie and as a bearer).
	b.Must(204, "DELETE", "/api/v1/session", nil)
	if got := b.Session(); got != "" {
		t.Errorf("the cookie survived the sign-out: %q", got)
	}
	for _, hdr := range []http.Header{{"Cookie": {"ballet_session=" + value}}, {"Authorization": {"Bearer " + value}}} {
		if r := w.send(probeReq{method: "GET", path: "/api/v1/session", header: hdr}); r.Status != 401 {
			t.Errorf("the ended session's value (%v): %d, want 401", hdr, r.Status)
		}
	}
}

// TestProbeRunnerProtocol: the run token (the agent session's) cannot call
// a runner-only route (403); another runner token cannot touch a run or
// a runner it does not hold (404, nothing revealed); the runner token
// cannot act as the agent session (403); a run token reaches its own run
// only (404 for another); and replays after the finish change nothing.
func TestProbeRunnerProtocol(t *testing.T) {
	w := newProbeWorld(t)
	run1 := "/api/v1/runs/" + w.leased.ID
	other := w.NewRunner("probe-other")
	createItem(w.Env, "ACME", map[string]any{"type": "task", "title": "Second run"})
	queueRun(w.Env, "ACME-3")
	second := other.MustLease()
	w.secrets = append(w.secrets, other.Token, second.Token)
	runnerOnly := []struct {
		method, suffix, ct string
		body               string
	}{
		{"POST", "/heartbeat", "", ""},
		{"POST", "/usage", "application/json", `{"input_tokens": 1}`},
		{"POST", "/finish", "application/json", `{"exit_status": 0}`},
		{"POST", "/log?offset=0", "application/octet-stream", "forged output"},
	}
	for _, c := range runnerOnly {
		r := w.send(probeReq{method: c.method, path: run1 + c.suffix, auth: "Bearer " + w.leased.Token, contentType: c.ct, body: []byte(c.body)})
		if r.Status != 403 {
			t.Errorf("%s %s with the run's own run token: %d, want 403: %s", c.method, c.suffix, r.Status, r.Body)
		}
		r = w.send(probeReq{method: c.method, path: run1 + c.suffix, auth: "Bearer " + other.Token, contentType: c.ct, body: []byte(c.body)})
		if r.Status != 404 {
			t.Errorf("%s %s with another runner's token: %d, want 404: %s", c.method, c.suffix, r.Status, r.Body)
		}
	}
	for _, p := range []string{"/lease", "/heartbeat"} {
		if r := w.Do(other.Token, "POST", "/api/v1/runners/"+w.runner.ID+p, map[string]any{}); r.Status != 404 {
			t.Errorf("POST /runners/{another's runner}%s: %d, want 404: %s", p, r.Status, r.Body)
		}
	}
	sessionOnly := []struct{ method, suffix, body string }{
		{"POST", "/report", `{"outcome": "done", "summary": "forged"}`},
		{"POST", "/questions", `{"text": "forged?", "blocking": true}`},
		{"GET", "/skills", ""},
	}
	for _, c := range sessionOnly {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r := w.send(probeReq{method: c.method, path: run1 + c.suffix, auth: "Bearer " + w.runner.Token, contentType: "application/json", body: body})
		if r.Status != 403 {
			t.Errorf("%s %s with the runner token: %d, want 403: %s", c.method, c.suffix, r.Status, r.Body)
		}
		r = w.send(probeReq{method: c.method, path: run1 + c.suffix, auth: "Bearer " + second.Token, contentType: "application/json", body: body})
		if r.Status != 404 {
			t.Errorf("%s %s with another run's token: %d, want 404: %s", c.method, c.suffix, r.Status, r.Body)
		}
	}
	// The run token reads nothing of the REST API (it holds no role).
	for _, p := range []string{"/api/v1/projects/ACME", "/api/v1/items/ACME-1", run1, "/api/v1/orgs", "/api/v1/tokens"} {
		r := w.Do(w.leased.Token, "GET", p, nil)
		if r.Status < 400 && p != "/api/v1/orgs" && p != "/api/v1/tokens" {
			t.Errorf("GET %s with a run token: %d: %.200s", p, r.Status, r.Body)
		}
	}

	// Finish, then replay everything.
	w.runner.Complete(w.leased, "done", "Done.")
	var before, after apiRun
	w.Admin(200, "GET", run1, nil).JSON(t, &before)
	w.runner.Finish(w.leased, 0)
	if r := w.Do(w.runner.Token, "POST", run1+"/finish", map[string]any{"exit_status": 1, "error": "replayed"}); r.Status != 200 {
		t.Errorf("a replayed finish with another exit status: %d: %s", r.Status, r.Body)
	}
	if r := w.Do(w.leased.Token, "POST", run1+"/report", map[string]any{"outcome": "failed", "summary": "late"}); r.Status != 401 {
		t.Errorf("a report after the finish with the revoked run token: %d, want 401: %s", r.Status, r.Body)
	}
	if r := w.Do(w.leased.Token, "POST", "/api/v1/mcp", initialize); r.Status != 401 {
		t.Errorf("MCP after the finish: %d, want 401: %s", r.Status, r.Body)
	}
	if r := w.Do(w.runner.Token, "POST", run1+"/heartbeat", nil); r.Status != 409 {
		t.Errorf("a heartbeat after the finish: %d, want 409: %s", r.Status, r.Body)
	}
	if r := w.Raw(w.runner.Token, "POST", run1+"/log?offset=0", "application/octet-stream", []byte("late")); r.Status >= 500 {
		t.Errorf("a log chunk after the finish: %d: %s", r.Status, r.Body)
	}
	w.Admin(200, "GET", run1, nil).JSON(t, &after)
	if after.Status != before.Status || after.Outcome != before.Outcome || after.Report != before.Report || *after.ExitStatus != 0 || after.Error != "" {
		t.Errorf("replays changed the finished run: before %+v, after %+v", before, after)
	}
}

// TestProbeRealtimeAcrossOrganizations: globex's admin, a run token and a
// runner token subscribe to nothing of acme's — by key, slug or id, with
// or without a replay cursor — and an organization's stream gives a
// viewer only what REST lets it read: its projects' events, not the
// organization's own history (members, tokens: member.manage, as GET
// /orgs/{org}/events).
func TestProbeRealtimeAcrossOrganizations(t *testing.T) {
	w := newProbeWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
	defer cancel()
	var org, project, item struct{ ID string }
	w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &org)
	w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &project)
	w.Admin(200, "GET", "/api/v1/items/ACME-1", nil).JSON(t, &item)
	streams := []string{"org:acme", "org:" + org.ID, "project:ACME", "project:" + project.ID, "item:ACME-1", "item:" + item.ID,
		"project:acme", "org:ACME", "item:ACME-1 ", "project:..", "org:%2e%2e"}
	for name, tok := range map[string]string{"globex's admin": w.other, "a run token": w.leased.Token, "a runner token": w.runner.Token} {
		c, err := realtime.Dial(ctx, w.URL, tok, nil)
		if err != nil {
			continue // refused at the handshake: nothing to subscribe to
		}
		for _, s := range streams {
			for _, after := range []int64{0, realtime.LiveOnly, 1} {
				if _, err := c.Subscribe(ctx, s, after); err == nil {
					t.Errorf("%s subscribed to %q (after %d)", name, s, after)
				}
			}
		}
		c.Close()
	}
	// A viewer's organization stream, replayed from the start.
	head := w.Admin(200, "GET", "/api/v1/projects/ACME/events?limit=1000", nil)
	var page struct {
		LastSeq int64 `json:"last_seq"`
	}
	head.JSON(t, &page)
	c, err := realtime.Dial(ctx, w.URL, w.viewer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "org:acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	// A last event in a project of acme's, after everything else: the
	// replay is over once it arrives.
	var last struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Last"}).JSON(t, &last)
	for {
		ev := apitest.Receive(t, sub.C(), "the organization stream's events")
		if ev.ProjectID == "" {
			t.Errorf("a viewer's org:acme stream carries %s (seq %d) of no project, which GET /orgs/acme/events refuses it (403)", ev.Type, ev.Seq)
		}
		if ev.Type == "ticket.created" && strings.Contains(string(ev.Payload), `"Last"`) {
			break
		}
	}
	w.Must(403, w.viewer, "GET", "/api/v1/orgs/acme/events", nil)
}

// TestProbeWebhooks: deliveries that are unsigned, signed wrongly, signed
// with another project's secret, for a project of another organization,
// for an unknown project or forge, huge, or of another media type are
// refused alike (401 for what a signature decides, so a delivery tells
// nothing about projects it cannot sign for; 413 past the limit), and
// never wake anything.
func TestProbeWebhooks(t *testing.T) {
	w := newProbeWorld(t)
	t.Setenv("ACME_HOOK_SECRET", "acme-hook-secret-0123456789")
	w.secrets = append(w.secrets, "acme-hook-secret-0123456789")
	w.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": map[string]any{"forge": "gitea",
		"url": "https://gitea.example.com/acme/app", "webhook_secret_ref": "env:ACME_HOOK_SECRET"}})
	body := []byte(`{"action":"opened","number":1,"pull_request":{"number":1}}`)
	sign := func(secret string) string { return giteaSignature(secret, body) }
	cases := []struct {
		name, path, sig, ct string
		body                []byte
		want                int
	}{
		{"unsigned", "/api/v1/hooks/gitea/ACME", "", "application/json", body, 401},
		{"a wrong signature", "/api/v1/hooks/gitea/ACME", sign("wrong"), "application/json", body, 401},
		{"an empty-secret signature", "/api/v1/hooks/gitea/ACME", sign(""), "application/json", body, 401},
		{"a signature of another body", "/api/v1/hooks/gitea/ACME", giteaSignature("acme-hook-secret-0123456789", []byte("{}")), "application/json", body, 401},
		{"a truncated signature", "/api/v1/hooks/gitea/ACME", sign("acme-hook-secret-0123456789")[:10], "application/json", body, 401},
		{"another organization's project", "/api/v1/hooks/gitea/GLX", sign("acme-hook-secret-0123456789"), "application/json", body, 401},
		{"an unknown project", "/api/v1/hooks/gitea/NOPE", sign("acme-hook-secret-0123456789"), "application/json", body, 401},
		{"a traversal", "/api/v1/hooks/gitea/%2e%2e", sign("acme-hook-secret-0123456789"), "application/json", body, 401},
		{"an unknown forge", "/api/v1/hooks/gitlab/ACME", sign("acme-hook-secret-0123456789"), "application/json", body, 404},
		{"a form body", "/api/v1/hooks/gitea/ACME", sign("acme-hook-secret-0123456789"), "application/x-www-form-urlencoded", body, 415},
		{"a huge body", "/api/v1/hooks/gitea/ACME", sign("x"), "application/json", make([]byte, server.MaxHookBody+1), 413},
	}
	for _, c := range cases {
		h := http.Header{"X-Gitea-Event": {"pull_request"}}
		if c.sig != "" {
			h.Set("X-Gitea-Signature", c.sig)
		}
		r := w.send(probeReq{method: "POST", path: c.path, contentType: c.ct, body: c.body, header: h})
		if r.Status != c.want {
			t.Errorf("a delivery %s: %d, want %d: %s", c.name, r.Status, c.want, r.Body)
		}
		if strings.Contains(string(r.Body), "acme-hook-secret") {
			t.Errorf("a delivery %s: the answer names the secret: %s", c.name, r.Body)
		}
	}
	// Signed right, twice (a replay): nothing waits for it, 204 both times.
	for range 2 {
		h := http.Header{"X-Gitea-Event": {"pull_request"}, "X-Gitea-Signature": {sign("acme-hook-secret-0123456789")}}
		if r := w.send(probeReq{method: "POST", path: "/api/v1/hooks/gitea/ACME", contentType: "application/json", body: body, header: h}); r.Status != 204 {
			t.Errorf("a signed delivery: %d, want 204: %s", r.Status, r.Body)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// giteaSignature is a Gitea delivery's X-Gitea-Signature: the HMAC-SHA256
// of the body with the secret, in hex.
func giteaSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
