package apitest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/service"
	"github.com/ballet/ballet/internal/mcp"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// The probes of the credentials' lifetimes, the Knowledge service behind
// Core, MCP and the secrets a project references.

// TestProbeDeadCredentialsOnEveryRoute: an expired API token, a revoked
// one, an expired runner token, the run token of a finished run and a
// token of a deleted kind are a 401 on every route of the table that
// takes a bearer (WWW-Authenticate set), whatever the route.
func TestProbeDeadCredentialsOnEveryRoute(t *testing.T) {
	w := newProbeWorld(t)
	ctx := context.Background()
	past := w.Core.Clock.Now().Add(-time.Minute)
	issue := func(kind, orgID, role string, scopes []string, exp *time.Time) string {
		secret, _, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: "bootstrap"}, kind, "probe dead "+kind, orgID, role, scopes, exp,
			w.Core.Clock.Now().Add(-time.Hour))
		if err := w.Core.Applier.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
		w.secrets = append(w.secrets, secret)
		return secret
	}
	var org struct{ ID string }
	w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &org)
	expiredAPI := issue(auth.KindAPI, org.ID, "admin", nil, &past)
	expiredRunner := issue(auth.KindRunner, "", "", []string{auth.ScopeRunner}, &past)
	var revoked struct{ ID, Token string }
	w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "to revoke", "organization": "acme", "role": "admin"}).JSON(t, &revoked)
	w.secrets = append(w.secrets, revoked.Token)
	w.Admin(204, "DELETE", "/api/v1/tokens/"+revoked.ID, nil)
	w.runner.Complete(w.leased, "done", "Done.") // its run token is revoked with the finish
	dead := map[string]string{"an expired API token": expiredAPI, "an expired runner token": expiredRunner,
		"a revoked API token": revoked.Token, "a finished run's token": w.leased.Token}
	for _, rt := range w.Core.API.Routes() {
		if credentialFree(rt) {
			continue
		}
		path := w.path(rt, w.values)
		for name, tok := range dead {
			var body []byte
			ct := ""
			if jsonBody(rt) {
				body, ct = []byte(`{}`), "application/json"
			}
			r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + tok, body: body, contentType: ct})
			if r.Status != 401 || r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s: %d (WWW-Authenticate %q), want 401: %.200s", rt.Method, rt.Path, name, r.Status,
					r.Header.Get("WWW-Authenticate"), r.Body)
			}
		}
	}
}

// knowledgeBehind starts the real Knowledge service behind the probe
// world's Core (its proxy and its introspection).
func knowledgeBehind(t *testing.T) (*probeWorld, *service.Server) {
	t.Helper()
	var handler atomic.Pointer[http.Handler]
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ks.Close)
	w := newProbeWorld(t, func(c *config.Config) { c.Knowledge.URL = ks.URL })
	cfg := config.KnowledgeDefault()
	cfg.Knowledge.Core, cfg.Knowledge.ServiceToken = w.URL, apitest.ServiceToken
	srv, err := service.Open(t.Context(), service.Options{Config: cfg, Clock: clock.NewFake(time.Now()),
		Store: storetest.OpenWith(t, "sqlite", knowledge.Migrations)})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	handler.Store(&h)
	return w, srv
}

// TestProbeKnowledgeThroughCore: every route of the Knowledge service's
// table, through Core's proxy: 401 without a credential or with a
// malformed one (the scheme in any case accepted), 404 for globex's admin
// on acme's knowledge (its existence not revealed), never a 500 for a
// hostile slug, space, body or query, and the service credential never a
// caller's.
func TestProbeKnowledgeThroughCore(t *testing.T) {
	w, srv := knowledgeBehind(t)
	w.Must(201, w.member, "POST", "/api/v1/knowledge/orgs/acme/spaces/default/entries", map[string]any{"slug": "guides/deploy",
		"title": "Deploying", "body": "Roll back with make rollback.", "tags": []string{"ops"}})
	values := map[string]string{"org": "acme", "space": "default", "slug": "guides%2Fdeploy"}
	fill := func(path string, vals map[string]string) string {
		return param.ReplaceAllStringFunc(service.Prefix+path, func(p string) string { return vals[p[1:len(p)-1]] })
	}
	for _, rt := range srv.API.Routes() {
		path := fill(rt.Path, values)
		var body []byte
		ct := ""
		if rt.Request != nil {
			body, ct = []byte(`{}`), "application/json"
		}
		for _, h := range []string{"", "Bearer", "Basic " + w.admin, w.admin, "Bearer " + apitest.ServiceToken, "bearer " + apitest.ServiceToken,
			"Bearer " + w.admin + "x"} {
			r := w.send(probeReq{method: rt.Method, path: path, auth: h, body: body, contentType: ct})
			if r.Status != 401 {
				t.Errorf("%s %s with Authorization %.30q: %d, want 401: %.200s", rt.Method, rt.Path, h, r.Status, r.Body)
			}
		}
		if rt.Method == "GET" {
			for _, h := range []string{"bearer " + w.viewer, "BEARER " + w.viewer} {
				r := w.send(probeReq{method: "GET", path: path, auth: h})
				if r.Status == 401 || r.Status == 403 || r.Status >= 500 {
					t.Errorf("GET %s with Authorization %.10q…: %d, want it accepted: %.200s", rt.Path, h, r.Status, r.Body)
				}
			}
		}
		r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + w.other, body: body, contentType: ct})
		if r.Status != 404 {
			t.Errorf("%s %s as globex's admin: %d, want 404: %.200s", rt.Method, rt.Path, r.Status, r.Body)
		}
		for _, name := range param.FindAllStringSubmatch(rt.Path, -1) {
			for _, v := range hostile {
				vals := map[string]string{}
				for k, x := range values {
					vals[k] = x
				}
				vals[name[1]] = v
				for _, tok := range []string{w.admin, w.other, apitest.BootstrapToken} {
					r := w.send(probeReq{method: rt.Method, path: fill(rt.Path, vals), auth: "Bearer " + tok, body: body, contentType: ct, raw: true})
					noServerError(t, fmt.Sprintf("%s %s", rt.Method, short(fill(rt.Path, vals))), r)
					if r.Status < 300 && (v == "globex" || tok == w.other) {
						t.Errorf("%s %s: %d: reaches another organization's knowledge: %.200s", rt.Method, short(fill(rt.Path, vals)), r.Status, r.Body)
					}
				}
			}
		}
		if rt.Request != nil {
			for name, b := range hostileBodies {
				r := w.send(probeReq{method: rt.Method, path: path, auth: "Bearer " + w.admin, body: b, contentType: "application/json"})
				noServerError(t, fmt.Sprintf("%s %s with %s", rt.Method, rt.Path, name), r)
				if r.Status < 400 {
					t.Errorf("%s %s with %s: %d, want a 4xx: %.200s", rt.Method, rt.Path, name, r.Status, r.Body)
				}
			}
		}
		if rt.Method == "GET" {
			for _, q := range hostileQueries {
				r := w.send(probeReq{method: "GET", path: path + "?" + q, auth: "Bearer " + w.admin})
				noServerError(t, fmt.Sprintf("GET %s?%s", rt.Path, short(q)), r)
			}
		}
	}
}

// TestProbeMCP: the agent session's MCP door with hostile calls: a tool
// that does not exist, arguments of the wrong type, huge arguments, a
// batch, another run's token, a slug or space that walks out of the
// organization's knowledge, and calls after the run's cancellation — each
// is refused (a JSON-RPC or tool error, or the API's 4xx), never a 500.
func TestProbeMCP(t *testing.T) {
	w := newProbeWorld(t)
	post := func(tok string, msg string) *apitest.Response {
		return w.send(probeReq{method: "POST", path: mcp.Path, auth: "Bearer " + tok, contentType: "application/json", body: []byte(msg),
			header: http.Header{"Accept": {"application/json, text/event-stream"}}})
	}
	call := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	}
	huge := `"` + strings.Repeat("a", 900_000) + `"`
	cases := []struct{ name, msg string }{
		{"an unknown tool", call("drop_database", `{}`)},
		{"a wrong type", call("submit_report", `{"outcome": 1, "summary": []}`)},
		{"an unknown outcome", call("submit_report", `{"outcome": "merged", "summary": "x"}`)},
		{"a huge summary", call("submit_report", `{"outcome": "done", "summary": `+huge+`}`)},
		{"a huge question", call("ask_question", `{"question": `+huge+`, "blocking": true}`)},
		{"a huge query", call("search_knowledge", `{"query": `+huge+`}`)},
		{"a traversal slug", call("read_entry", `{"slug": "../../../orgs/globex/spaces"}`)},
		{"a traversal space", call("read_entry", `{"slug": "a", "space": "..%2F..%2Fglobex"}`)},
		{"another organization's space", call("search_knowledge", `{"query": "x", "space": "globex"}`)},
		{"a negative version", call("read_entry", `{"slug": "a", "version": -1}`)},
		{"a huge version", call("read_entry", `{"slug": "a", "version": 1e300}`)},
		{"too many tags", call("search_knowledge", `{"query": "x", "tags": [`+strings.Repeat(`"t",`, 100)+`"t"]}`)},
		{"no method", `{"jsonrpc":"2.0","id":3}`},
		{"a notification flood", strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 1)},
		{"a control character", call("ask_question", `{"question": "a\u001bb", "blocking": false}`)},
	}
	for _, c := range cases {
		r := post(w.leased.Token, c.msg)
		noServerError(t, "MCP "+c.name, r)
		if r.Status == 200 && !strings.Contains(string(r.Body), `"isError":true`) && !strings.Contains(string(r.Body), `"error"`) {
			t.Errorf("MCP %s: accepted: %.300s", c.name, r.Body)
		}
	}
	// The run's report and question state are untouched by all that.
	var got apiRun
	w.Admin(200, "GET", "/api/v1/runs/"+w.leased.ID, nil).JSON(t, &got)
	if got.Outcome != "" || got.BlockingQuestion {
		t.Fatalf("hostile calls changed the run: %+v", got)
	}
	// After the cancellation, every tool refuses.
	r, err := w.Core.Runs.Get(context.Background(), w.leased.ID)
	if err != nil {
		t.Fatal(err)
	}
	part, ok := w.Core.Runs.Cancel(r, "probe", w.Core.Clock.Now())
	if !ok {
		t.Fatal("not cancellable")
	}
	if err := w.Core.Applier.Apply(context.Background(), &part); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{call("submit_report", `{"outcome": "done", "summary": "late"}`),
		call("ask_question", `{"question": "late?", "blocking": true}`), call("get_ticket", `{}`),
		call("search_knowledge", `{"query": "x"}`), call("read_entry", `{"slug": "a"}`)} {
		r := post(w.leased.Token, tool)
		noServerError(t, "MCP after the cancellation", r)
		if r.Status == 200 && !strings.Contains(string(r.Body), `"isError":true`) {
			t.Errorf("MCP %s after the cancellation: %.300s", tool[60:], r.Body)
		}
	}
	w.Admin(200, "GET", "/api/v1/runs/"+w.leased.ID, nil).JSON(t, &got)
	if got.Outcome != "" || got.BlockingQuestion {
		t.Fatalf("calls after the cancellation changed the run: %+v", got)
	}
}

// TestProbeSecretValuesStayHidden: the values a project's secret
// references resolve to (its forge credential, its webhook secret) appear
// in no answer of the API a person reads — the project, its events, the
// organization's history, the run, its events — nor in Core's log nor in
// the event log, on every route of the table; only the lease hands the
// forge credential to the runner that needs it.
func TestProbeSecretValuesStayHidden(t *testing.T) {
	const cred, hook = "forge-credential-value-0123456789", "webhook-secret-value-0123456789"
	t.Setenv("ACME_FORGE", cred)
	t.Setenv("ACME_HOOK", hook)
	w := newProbeWorld(t)
	w.secrets = append(w.secrets, cred, hook)
	w.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": map[string]any{"forge": "git",
		"url": "/srv/git/acme.git", "credentials_ref": "env:ACME_FORGE", "webhook_secret_ref": "env:ACME_HOOK"}})
	createItem(w.Env, "ACME", map[string]any{"type": "task", "title": "With credentials"})
	queueRun(w.Env, "ACME-3")
	l := w.runner.MustLease()
	w.secrets = append(w.secrets, l.Token)
	w.Must(200, l.Token, "POST", "/api/v1/runs/"+l.ID+"/report", map[string]any{"outcome": "done", "summary": "Done."})
	w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+l.ID+"/finish", map[string]any{"exit_status": 0})
	values := map[string]string{}
	for k, v := range w.values {
		values[k] = v
	}
	values["run"], values["item"] = l.ID, "ACME-3"
	for _, rt := range w.Core.API.Routes() {
		if rt.Method != "GET" {
			continue
		}
		path := w.path(rt, values)
		for _, tok := range []string{apitest.BootstrapToken, w.admin, w.viewer} {
			r := w.send(probeReq{method: "GET", path: path, auth: "Bearer " + tok})
			for _, s := range []string{cred, hook} {
				if strings.Contains(string(r.Body), s) {
					t.Errorf("GET %s holds a secret value: %.300s", rt.Path, r.Body)
				}
			}
		}
	}
	rows, err := w.Store.Query(context.Background(), `SELECT type, payload FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows.Len() {
		var typ, payload string
		if err := rows.Scan(i, &typ, &payload); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{cred, hook} {
			if strings.Contains(payload, s) {
				t.Errorf("event %s holds a secret value: %.300s", typ, payload)
			}
		}
	}
}
