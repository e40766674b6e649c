package apitest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// The adversarial probes: an attacker's requests against every door of
// Core, derived from the route tables so that a new route is probed too.
// Each probe asserts the exact answer the API documents (401 without a
// credential, 404 for what another organization holds, 400 naming the
// field…), and every probe of the suite holds Core to three rules: no
// answer is a 500, nothing panics, and no secret a probe used appears in
// an answer it should not or in Core's log.

// probeWorld is what the probes attack: two organizations (acme, globex),
// a project each, tickets, a question, and a run leased by a runner.
type probeWorld struct {
	*apitest.Env
	admin, member, viewer, other string // API tokens: acme's admin, member, viewer; globex's admin
	runner                       *apitest.Runner
	leased                       apitest.LeasedRun
	values                       map[string]string // a path parameter → a value naming something of acme's
	question                     string
	tokenID                      string // an API token of acme's admin (its id)
	// raw serves Core's handler without the OpenAPI check of every
	// answer: hostile paths are ambiguous to the document by design.
	raw string
	// secrets are every credential the world handed out: none may appear
	// in Core's log.
	secrets []string
}

func newProbeWorld(t *testing.T, adjust ...func(*config.Config)) *probeWorld {
	t.Helper()
	e := apitest.New(t, storetest.Open(t, "sqlite"), adjust...)
	acme, globex := e.Org("acme"), e.Org("globex")
	e.Project("acme", "ACME")
	e.Project("globex", "GLX")
	w := &probeWorld{Env: e, admin: e.RoleToken(acme, "admin"), member: e.RoleToken(acme, "member"),
		viewer: e.RoleToken(acme, "viewer"), other: e.RoleToken(globex, "admin")}
	createItem(e, "ACME", map[string]any{"type": "task", "title": "First"})
	createItem(e, "ACME", map[string]any{"type": "task", "title": "Second"})
	createItem(e, "GLX", map[string]any{"type": "task", "title": "Theirs"})
	var q struct{ ID string }
	e.Admin(201, "POST", "/api/v1/items/ACME-1/questions", map[string]any{"text": "Which database?"}).JSON(t, &q)
	w.question = q.ID
	var tk struct{ ID, Token string }
	e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "probe", "organization": "acme", "role": "viewer"}).JSON(t, &tk)
	w.tokenID = tk.ID
	queueRun(e, "ACME-1")
	w.runner = e.NewRunner("probe-runner")
	w.leased = w.runner.MustLease()
	w.values = map[string]string{"org": "acme", "project": "ACME", "item": "ACME-1", "blocker": "ACME-2", "run": w.leased.ID,
		"runner": w.runner.ID, "name": "default", "subject": "oidc|probe", "forge": "gitea", "id": "", "delivery": "none"}
	w.secrets = []string{apitest.BootstrapToken, apitest.ServiceToken, w.admin, w.member, w.viewer, w.other, tk.Token,
		w.runner.Token, w.leased.Token}
	rawSrv := httptest.NewServer(e.Core.Handler())
	t.Cleanup(rawSrv.Close)
	w.raw = rawSrv.URL
	t.Cleanup(func() { w.checkLog(t) })
	return w
}

// checkLog fails the test when Core logged a panic, an internal error or
// any secret of the world.
func (w *probeWorld) checkLog(t *testing.T) {
	logs := w.Logs()
	for _, bad := range []string{"panic", "internal error"} {
		if i := strings.Index(logs, bad); i >= 0 {
			t.Errorf("Core logged %q: %s", bad, line(logs, i))
		}
	}
	for _, s := range w.secrets {
		if i := strings.Index(logs, s); s != "" && i >= 0 {
			t.Errorf("Core logged a secret (%.12s…): %s", s, line(logs, i))
		}
	}
}

// line returns the log line around index i.
func line(s string, i int) string {
	start := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		return s[start:]
	}
	return s[start : i+end]
}

// param matches a route pattern's path parameters.
var param = regexp.MustCompile(`\{([a-z_]+)\}`)

// path fills a route's pattern: values for its parameters, the {id} of a
// question or a token by its route.
func (w *probeWorld) path(rt *server.Route, values map[string]string) string {
	return param.ReplaceAllStringFunc(rt.Path, func(p string) string {
		name := p[1 : len(p)-1]
		v, ok := values[name]
		if name == "id" && v == "" {
			v = w.tokenID
			if strings.HasPrefix(rt.Path, "/api/v1/questions/") {
				v = w.question
			}
			ok = true
		}
		if !ok {
			panic("no probe value for " + p + " in " + rt.Path)
		}
		return v
	})
}

// probeReq is one probe: a request sent exactly as given (the
// Authorization header verbatim, no redirect followed).
type probeReq struct {
	method, path string
	auth         string // the whole Authorization header ("": none)
	contentType  string
	body         []byte
	header       http.Header
	raw          bool // to Core's handler without the OpenAPI check
}

// noRedirect is a client that shows a redirect instead of following it.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (w *probeWorld) send(p probeReq) *apitest.Response {
	w.T.Helper()
	var rd io.Reader
	if p.body != nil {
		rd = bytes.NewReader(p.body)
	}
	base := w.URL
	if p.raw {
		base = w.raw
	}
	req, err := http.NewRequest(p.method, base+p.path, rd)
	if err != nil {
		w.T.Fatalf("probe %s %s: %v", p.method, p.path, err)
	}
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	if p.contentType != "" {
		req.Header.Set("Content-Type", p.contentType)
	}
	for k, vs := range p.header {
		req.Header[k] = vs
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		w.T.Fatalf("probe %s %s: %v", p.method, p.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &apitest.Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// noServerError fails the test on a 5xx.
func noServerError(t *testing.T, what string, r *apitest.Response) {
	t.Helper()
	// The probe world's repositories are not there: a ticket's changes
	// answer 503 unavailable, naming the repository — the one 5xx a route
	// may give here, and only that way.
	if r.Status == 503 && strings.Contains(what, "/changes") && strings.Contains(string(r.Body), `"code":"unavailable"`) {
		return
	}
	if r.Status >= 500 {
		t.Errorf("%s: %d %s", what, r.Status, r.Body)
	}
}

// credentialFree reports whether a route takes no bearer credential: a
// webhook (its signature), the introspection (the service credential),
// the sign-in (its body).
func credentialFree(rt *server.Route) bool {
	return rt.Perm == server.PermWebhook || rt.Perm == server.PermService || rt.Perm == server.PermSignIn
}

// jsonBody reports whether a route reads a JSON body.
func jsonBody(rt *server.Route) bool { return rt.Request != nil && rt.RawBody == "" }

// TestProbeEveryRouteWithoutACredential: every route of the table, with
// no credential and with every malformed Authorization header an attacker
// (or a sloppy client) sends, answers 401 with WWW-Authenticate — the
// sign-in, whose credential is its body, answers 400. The bearer scheme is
// case-insensitive (RFC 9110): "bearer" and "BEARER" act as "Bearer".
func TestProbeEveryRouteWithoutACredential(t *testing.T) {
	w := newProbeWorld(t)
	bad := []string{"", "Bearer", "Bearer ", "Bearer  ", "Basic " + apitest.BootstrapToken, "Token " + apitest.BootstrapToken,
		apitest.BootstrapToken, "Bearer " + apitest.BootstrapToken + "x", "Bearer x" + apitest.BootstrapToken,
		"Bearer " + strings.ToUpper(apitest.BootstrapToken), "Bearer " + apitest.ServiceToken, "Bearer ballet_" + strings.Repeat("A", 43),
		"Bearer ballet-session_" + strings.Repeat("A", 43), "Bearer " + strings.Repeat("x", 8000)}
	for _, rt := range w.Core.API.Routes() {
		path := w.path(rt, w.values)
		for _, h := range bad {
			var body []byte
			ct := ""
			if jsonBody(rt) {
				body, ct = []byte(`{}`), "application/json"
			}
			r := w.send(probeReq{method: rt.Method, path: path, auth: h, body: body, contentType: ct})
			what := fmt.Sprintf("%s %s with Authorization %.40q", rt.Method, rt.Path, h)
			noServerError(t, what, r)
			switch {
			case rt.Perm == server.PermService && h == "Bearer "+apitest.ServiceToken:
				if r.Status != 400 {
					t.Errorf("%s: %d, want 400 (no credential to introspect): %s", what, r.Status, r.Body)
				}
			case rt.Perm == server.PermSignIn:
				if r.Status != 400 {
					t.Errorf("%s: %d, want 400 (no token in the body): %s", what, r.Status, r.Body)
				}
			case r.Status != 401:
				t.Errorf("%s: %d, want 401: %s", what, r.Status, r.Body)
			case !credentialFree(rt) && r.Header.Get("WWW-Authenticate") == "":
				t.Errorf("%s: 401 without WWW-Authenticate", what)
			}
		}
	}
	// The scheme in any case, and spaces around the credential.
	for _, h := range []string{"bearer " + w.admin, "BEARER " + w.admin, "BeArEr " + w.admin, "Bearer  " + w.admin, " Bearer " + w.admin,
		"Bearer " + w.admin + " "} {
		r := w.send(probeReq{method: "GET", path: "/api/v1/projects/ACME", auth: h})
		if r.Status != 200 {
			t.Errorf("GET /api/v1/projects/ACME with Authorization %.20q…: %d, want 200: %s", h, r.Status, r.Body)
		}
	}
}

// TestProbeEveryRouteAsAnotherOrganization: on every route that names
// something of acme's, globex's admin gets what a stranger to acme gets:
// 404 (its existence not revealed) on organization and project routes,
// 403 on the runner protocol (no runner token), 401 on the doors that take
// another credential — never a success, never a 500.
func TestProbeEveryRouteAsAnotherOrganization(t *testing.T) {
	w := newProbeWorld(t)
	for _, rt := range w.Core.API.Routes() {
		if !strings.Contains(rt.Path, "{") {
			continue
		}
		var body []byte
		ct := ""
		if jsonBody(rt) {
			body, ct = []byte(`{}`), "application/json"
		}
		if rt.RawBody != "" {
			body, ct = []byte(`{}`), rt.RawBody
		}
		path := w.path(rt, w.values)
		if rt.Path == "/api/v1/runs/{run}/log" && rt.Method == "POST" {
			path += "?offset=0"
		}
		r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + w.other, body: body, contentType: ct})
		what := fmt.Sprintf("%s %s as globex's admin", rt.Method, path)
		noServerError(t, what, r)
		want := 404
		switch {
		case rt.Perm == run.PermRunner || rt.Perm == run.PermRun || rt.Perm == access.PlatformAdmin:
			want = 403
		case rt.Perm == server.PermWebhook:
			want = 401
		case rt.Path == "/api/v1/tokens/{id}" || rt.Path == "/api/v1/tokens/{id}/events":
			want = 404 // another's token is not found
		}
		if r.Status != want {
			t.Errorf("%s: %d, want %d: %s", what, r.Status, want, r.Body)
		}
	}
}

// hostile are path parameter values an attacker tries: dot segments,
// encoded slashes and dots, NUL and invalid UTF-8, numbers at the edges,
// a huge name, and globex's own names (the other organization's).
var hostile = []string{"..", ".", "%2e%2e", "%2E%2E%2F%2E%2E", "a%2Fb", "a%2F..%2F..%2Fplatform", "%00", "%ff%fe", "-1", "0",
	"1e99", "99999999999999999999", "%20", "a%0Ab", "%3Cscript%3E", strings.Repeat("A", 4000), "GLX", "GLX-1", "globex"}

// TestProbeHostilePathParameters: every route with every path parameter
// replaced in turn by a hostile value, as acme's admin and as the platform
// admin: never a 500, never a success that names globex's things, and a
// dot segment never reaches a handler (the mux redirects or refuses it).
func TestProbeHostilePathParameters(t *testing.T) {
	w := newProbeWorld(t)
	for _, rt := range w.Core.API.Routes() {
		for _, name := range param.FindAllStringSubmatch(rt.Path, -1) {
			for _, v := range hostile {
				values := map[string]string{}
				for k, x := range w.values {
					values[k] = x
				}
				values[name[1]] = v
				var body []byte
				ct := ""
				if jsonBody(rt) {
					body, ct = []byte(`{}`), "application/json"
				}
				path := w.path(rt, values)
				r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + w.admin, body: body, contentType: ct, raw: true})
				what := fmt.Sprintf("%s %s as acme's admin", rt.Method, short(path))
				noServerError(t, what, r)
				if r.Status < 300 && strings.Contains(v, "GLX") || r.Status < 300 && v == "globex" {
					t.Errorf("%s: %d: acme's admin reaches globex's %s: %s", what, r.Status, name[1], r.Body)
				}
				r = w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + apitest.BootstrapToken, body: body, contentType: ct, raw: true})
				noServerError(t, fmt.Sprintf("%s %s as the platform admin", rt.Method, short(path)), r)
			}
		}
	}
}

// short shortens a path for a message.
func short(p string) string {
	if len(p) > 120 {
		return p[:120] + "…"
	}
	return p
}

// hostileBodies are JSON bodies an attacker sends to every route that
// reads one: each must be refused with a 4xx naming the problem.
var hostileBodies = map[string][]byte{
	"an unknown field":        []byte(`{"zz_unknown": 1}`),
	"a duplicate field":       []byte(`{"name": "a", "name": "b"}`),
	"a miscased field":        []byte(`{"NAME": "a"}`),
	"not an object":           []byte(`[1, 2, 3]`),
	"truncated JSON":          []byte(`{"name": `),
	"trailing data":           []byte(`{} {}`),
	"invalid UTF-8":           []byte("{\"name\": \"\xff\xfe\"}"),
	"a number past float64":   []byte(`{"version": 1e999}`),
	"a huge integer":          []byte(`{"version": 99999999999999999999999999}`),
	"a negative version":      []byte(`{"version": -1}`),
	"deep nesting":            []byte(strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)),
	"deep arrays":             []byte(`{"labels": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`),
	"a string":                []byte(`"x"`),
	"a NUL in a string":       []byte(`{"name": "a\u0000b"}`),
	"a lone surrogate":        []byte(`{"name": "\ud800"}`),
	"an object for a string":  []byte(`{"name": {"a": 1}}`),
	"a float for an integer":  []byte(`{"version": 1.5}`),
	"a string for an integer": []byte(`{"version": "1"}`),
}

// TestProbeHostileBodies: every route that reads a JSON body, as the
// platform admin (who may call most of them), with every hostile body, a
// body past the limit and a body of another media type: a 4xx every time
// (413 past the limit), never a 500 — and never a success for a body that
// is not a JSON object of the route's fields.
func TestProbeHostileBodies(t *testing.T) {
	w := newProbeWorld(t)
	limit := int(w.Core.Config.HTTP.MaxBodyBytes)
	for _, rt := range w.Core.API.Routes() {
		if !jsonBody(rt) || rt.Perm == server.PermService || rt.Perm == server.PermWebhook {
			continue
		}
		path := w.path(rt, w.values)
		tokens := []string{apitest.BootstrapToken, w.admin}
		switch rt.Perm {
		case run.PermRunner:
			tokens = []string{w.runner.Token}
		case run.PermRun:
			tokens = []string{w.leased.Token}
		}
		for _, tok := range tokens {
			for name, b := range hostileBodies {
				r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + tok, body: b, contentType: "application/json"})
				what := fmt.Sprintf("%s %s with %s", rt.Method, rt.Path, name)
				noServerError(t, what, r)
				if r.Status < 400 && rt.Serve == nil && name != "a negative version" && name != "a huge integer" && name != "a number past float64" {
					t.Errorf("%s: %d, want a 4xx: %s", what, r.Status, r.Body)
				}
			}
			big := append([]byte(`{"name": "`), bytes.Repeat([]byte("a"), limit)...)
			big = append(big, `"}`...)
			if rt.MaxBody > 0 {
				big = append([]byte(`{"name": "`), bytes.Repeat([]byte("a"), int(rt.MaxBody))...)
			}
			r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + tok, body: big, contentType: "application/json",
				header: http.Header{"Accept": {"application/json, text/event-stream"}}})
			what := fmt.Sprintf("%s %s with a body past the limit", rt.Method, rt.Path)
			noServerError(t, what, r)
			if r.Status != 413 && !(tok == w.admin && r.Status == 403) {
				t.Errorf("%s: %d, want 413: %.300s", what, r.Status, r.Body)
			}
			for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
				r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + tok, body: []byte("a=1&b=2"), contentType: ct})
				what := fmt.Sprintf("%s %s with a form body as %q", rt.Method, rt.Path, ct)
				noServerError(t, what, r)
				if r.Status < 400 && rt.Serve == nil {
					t.Errorf("%s: %d, want a 4xx: %s", what, r.Status, r.Body)
				}
			}
		}
	}
}

// hostileQueries are query strings an attacker appends to every GET route.
var hostileQueries = []string{"after=-1", "after=1e99", "after=99999999999999999999", "after=abc", "after=9007199254740993",
	"limit=-1", "limit=0", "limit=1e3", "limit=99999999999", "offset=-1", "offset=1e99", "offset=999999999999999999",
	"version=-1", "version=0", "version=1e99", "version=99999999999999999999", "after=1&after=2", "limit=%00", "kind=%ff",
	"q=" + url.QueryEscape(strings.Repeat("x", 10000)), "state=..%2F", "type=%3Cscript%3E"}

// TestProbeHostileQueries: every GET route of the table with every
// hostile query, as the platform admin: a 200 (a parameter the route does
// not read is ignored) or a 400 naming the parameter, never a 500.
func TestProbeHostileQueries(t *testing.T) {
	w := newProbeWorld(t)
	for _, rt := range w.Core.API.Routes() {
		if rt.Method != "GET" {
			continue
		}
		path := w.path(rt, w.values)
		for _, q := range hostileQueries {
			r := w.send(probeReq{method: "GET", path: path + "?" + q, auth: "Bearer " + apitest.BootstrapToken})
			what := fmt.Sprintf("GET %s?%s", rt.Path, short(q))
			noServerError(t, what, r)
			if r.Status == 400 {
				var e struct {
					Error struct {
						Details []struct{ Field string }
					}
				}
				_ = json.Unmarshal(r.Body, &e)
				name, _, _ := strings.Cut(q, "=")
				if len(e.Error.Details) == 0 || e.Error.Details[0].Field != name {
					t.Errorf("%s: 400 not naming %s: %s", what, name, r.Body)
				}
			}
		}
	}
}
