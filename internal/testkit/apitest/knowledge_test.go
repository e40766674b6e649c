package apitest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	knowledge "github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/knowledge/client/clientfake"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/oidctest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type introspection struct {
	Active        bool
	Subject       string
	Kind          string
	PlatformAdmin *bool `json:"platform_admin"`
	Orgs          []struct{ Slug, ID, Role string }
	ExpiresAt     *time.Time `json:"expires_at"`
}

func introspect(t *testing.T, e *apitest.Env, cred string) introspection {
	t.Helper()
	var out introspection
	e.Must(200, apitest.ServiceToken, "POST", server.IntrospectPath, map[string]any{"credential": cred}).JSON(t, &out)
	return out
}

func roles(in introspection) map[string]string {
	out := map[string]string{}
	for _, o := range in.Orgs {
		out[o.Slug] = o.Role
	}
	return out
}

// TestIntrospect: the service credential resolves every credential Core
// accepts into its subject and organization roles, and nothing else may
// call the endpoint.
func TestIntrospect(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcEnv(t, s, iss)
		e.Org("globex")
		e.Admin(200, "PUT", "/api/v1/orgs/globex/members/"+maxSub, map[string]any{"role": "admin"})
		e.Admin(200, "PUT", "/api/v1/projects/ACME/members/"+stranger, map[string]any{"role": "member"})

		boot := introspect(t, e, apitest.BootstrapToken)
		if !boot.Active || boot.Subject != "bootstrap" || boot.PlatformAdmin == nil || !*boot.PlatformAdmin ||
			roles(boot)["acme"] != "admin" || roles(boot)["globex"] != "admin" {
			t.Errorf("bootstrap: %+v", boot)
		}
		maxIn := introspect(t, e, iss.Token(t, maxSub, oidctest.ExpiresIn(10*time.Minute)))
		if !maxIn.Active || maxIn.Subject != maxSub || maxIn.Kind != "human" || *maxIn.PlatformAdmin || maxIn.ExpiresAt == nil ||
			len(maxIn.Orgs) != 2 || roles(maxIn)["acme"] != "member" || roles(maxIn)["globex"] != "admin" {
			t.Errorf("max: %+v", maxIn)
		}
		if in := introspect(t, e, iss.Token(t, stranger)); !in.Active || roles(in)["acme"] != "viewer" || len(in.Orgs) != 1 {
			t.Errorf("a project-only member reads the organization's knowledge: %+v", in)
		}
		acme := e.Org("initech")
		tok := e.TokenFor("bootstrap", acme, "member")
		if in := introspect(t, e, tok); !in.Active || in.Kind != "service" || len(in.Orgs) != 1 || roles(in)["initech"] != "member" {
			t.Errorf("API token: %+v", in)
		}
		// A token of max limited to tracker.read is a viewer whatever its role.
		var created struct {
			Secret string `json:"token"`
		}
		e.Must(201, iss.Token(t, maxSub), "POST", "/api/v1/tokens", map[string]any{"name": "k", "organization": "acme", "role": "member",
			"scopes": []string{"tracker.read"}}).JSON(t, &created)
		if in := introspect(t, e, created.Secret); roles(in)["acme"] != "viewer" || len(in.Orgs) != 1 {
			t.Errorf("a token scoped to tracker.read is a viewer: %+v", in)
		}
		for _, cred := range []string{"nonsense", "ballet_unknown", apitest.ServiceToken, iss.Token(t, "x", oidctest.ExpiresIn(-time.Minute))} {
			r := e.Must(200, apitest.ServiceToken, "POST", server.IntrospectPath, map[string]any{"credential": cred})
			if string(bytes.TrimSpace(r.Body)) != `{"active":false}` {
				t.Errorf("%.20s…: %s", cred, r.Body)
			}
		}
		e.Must(400, apitest.ServiceToken, "POST", server.IntrospectPath, map[string]any{"credential": ""})
		e.Must(400, apitest.ServiceToken, "POST", server.IntrospectPath, map[string]any{"token": "x"})
		for _, caller := range []string{"", apitest.BootstrapToken, apitest.ServiceToken + "x", apitest.ServiceToken[:len(apitest.ServiceToken)-1], tok} {
			e.Must(401, caller, "POST", server.IntrospectPath, map[string]any{"credential": apitest.BootstrapToken})
		}
		if strings.Contains(e.Logs(), apitest.ServiceToken) {
			t.Error("Core logged the service credential")
		}
	})
}

// TestIntrospectWithoutServiceCredential: a Core with no service
// credential configured lets nothing call the endpoint.
func TestIntrospectWithoutServiceCredential(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.Knowledge.ServiceToken = "" })
		for _, caller := range []string{"", apitest.BootstrapToken, apitest.ServiceToken} {
			e.Must(401, caller, "POST", server.IntrospectPath, map[string]any{"credential": apitest.BootstrapToken})
		}
	})
}

// TestServiceCredentialIsNoUserCredential: every route but the
// introspection endpoint refuses the service credential (401), as do the
// realtime WebSocket and the Knowledge proxy.
func TestServiceCredentialIsNoUserCredential(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fake := clientfake.Start(t, apitest.ServiceToken)
		e := apitest.New(t, s, func(c *config.Config) { c.Knowledge.URL = fake.URL })
		e.Org("acme")
		e.Project("acme", "ACME")
		param := regexp.MustCompile(`\{[a-z_]+\}`)
		n := 0
		for _, rt := range e.Core.API.Routes() {
			if rt.Path == server.IntrospectPath {
				continue
			}
			path := param.ReplaceAllStringFunc(rt.Path, func(p string) string {
				if p == "{forge}" {
					return "gitea"
				}
				return map[string]string{"{org}": "acme", "{project}": "ACME"}[p] + "x"
			})
			body := map[string]any{}
			if rt.Perm == server.PermSignIn { // its credential is the body's
				body["token"] = apitest.ServiceToken
			}
			if r := e.Do(apitest.ServiceToken, rt.Method, path, body); r.Status != 401 {
				t.Errorf("%s %s with the service credential: %d %s", rt.Method, rt.Path, r.Status, r.Body)
			}
			n++
		}
		for _, path := range []string{"/api/v1/realtime", "/api/v1/knowledge/orgs/acme/spaces"} {
			if r := e.Do(apitest.ServiceToken, "GET", path, nil); r.Status != 401 {
				t.Errorf("GET %s with the service credential: %d %s", path, r.Status, r.Body)
			}
		}
		if len(fake.Requests()) != 0 {
			t.Errorf("the proxy forwarded the service credential")
		}
		t.Logf("%d routes refuse the service credential", n)
	})
}

// TestKnowledgeProxy: Core forwards /api/v1/knowledge/… to the configured
// service as it came (path, query, bearer), without hop-by-hop headers or
// cookies either way, within Core's body limit; a service that does not
// answer is a 503 in the API's error shape.
func TestKnowledgeProxy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fake := clientfake.Start(t, apitest.ServiceToken)
		e := apitest.New(t, s, func(c *config.Config) { c.Knowledge.URL = fake.URL; c.HTTP.MaxBodyBytes = 4096 })
		send := func(method, path string, body []byte, header map[string]string) (*http.Response, []byte) {
			t.Helper()
			req, err := http.NewRequest(method, e.URL+path, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, b
		}
		resp, body := send("PUT", "/api/v1/knowledge/orgs/acme/spaces/default/entries/a%2Fb?x=1&y=2", []byte(`{"version":1}`), map[string]string{
			"Authorization": "Bearer user-credential", "Cookie": "ballet_session=secret", "Connection": "X-Hop", "X-Hop": "1",
			"X-Forwarded-For": "6.6.6.6", "Content-Type": "application/json"})
		var echo struct {
			Method, Path, Query string
			RawPath             string `json:"raw_path"`
			Headers             http.Header
			BodyBytes           int `json:"body_bytes"`
		}
		if resp.StatusCode != 200 || resp.Header.Get("X-Fake") != "echo" {
			t.Fatalf("proxied: %d %s", resp.StatusCode, body)
		}
		(&apitest.Response{Body: body}).JSON(t, &echo)
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("the service set a cookie on Core's origin: %q", resp.Header.Get("Set-Cookie"))
		}
		if echo.Method != "PUT" || echo.RawPath != "/api/v1/knowledge/orgs/acme/spaces/default/entries/a%2Fb" || echo.Query != "x=1&y=2" ||
			echo.BodyBytes != len(`{"version":1}`) || echo.Headers.Get("Authorization") != "Bearer user-credential" {
			t.Errorf("forwarded as %+v", echo)
		}
		for _, h := range []string{"Cookie", "X-Hop", "Connection", "X-Forwarded-For"} {
			if v := echo.Headers.Get(h); v != "" {
				t.Errorf("forwarded %s: %q", h, v)
			}
		}
		// Core's body limit; a body of unknown length is cut at it too.
		resp, body = send("POST", "/api/v1/knowledge/orgs/acme/spaces/default/entries", make([]byte, 4097), nil)
		if resp.StatusCode != 413 || !strings.Contains(string(body), `"too_large"`) {
			t.Errorf("a body over the limit: %d %s", resp.StatusCode, body)
		}
		req, _ := http.NewRequest("POST", e.URL+"/api/v1/knowledge/orgs/acme/spaces", io.MultiReader(bytes.NewReader(make([]byte, 8000))))
		req.ContentLength = -1
		if r, err := http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		} else {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != 413 {
				t.Errorf("a chunked body over the limit: %d %s", r.StatusCode, b)
			}
		}
		// Only the prefix is proxied: a path that leaves it is Core's.
		for _, p := range []string{"/api/v1/knowledgex/orgs", "/api/v1/knowledge/%2e%2e/tokens", "/api/v1/knowledge/orgs/.%2E/%2e%2E/x", "/api/v1/knowledge/%2E"} {
			if resp, body := send("GET", p, nil, nil); resp.StatusCode != 404 || resp.Header.Get("X-Fake") != "" {
				t.Errorf("%s: %d %s", p, resp.StatusCode, body)
			}
		}
		for _, r := range fake.Requests() {
			if p := r.URL.EscapedPath(); !strings.HasPrefix(p, "/api/v1/knowledge/orgs/acme/spaces") {
				t.Errorf("%s reached the service", p)
			}
		}
		// The service down.
		fake.SetDown(true)
		if resp, body := send("GET", "/api/v1/knowledge/orgs/acme/spaces", nil, nil); resp.StatusCode != 503 {
			t.Errorf("service answering 503: %d %s", resp.StatusCode, body)
		}
		down := apitest.New(t, s, func(c *config.Config) { c.Knowledge.URL = "http://127.0.0.1:1" })
		r := down.Do("user-credential", "GET", "/api/v1/knowledge/orgs/acme/spaces", nil)
		if r.Status != 503 || r.ErrorCode() != "unavailable" {
			t.Errorf("no service: %d %s", r.Status, r.Body)
		}
	})
}

// TestMCPKnowledgeTools: an agent session searches and reads its
// organization's knowledge through Core's MCP endpoint (the SDK's client),
// never another organization's; with the service down the tools answer an
// error the agent can read, and the session goes on.
func TestMCPKnowledgeTools(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fake := clientfake.Start(t, apitest.ServiceToken)
		fake.Put("acme", knowledge.Entry{Slug: "conventions/go", Title: "Go conventions", Body: "Wrap every error with context.", Tags: []string{"go"}})
		fake.Put("acme", knowledge.Entry{Slug: "conventions/go", Title: "Go conventions", Body: "Wrap every error with context; log it once.", Tags: []string{"go"}})
		fake.Put("acme", knowledge.Entry{Space: "ops", Slug: "deploy", Title: "Deploy", Body: "An error budget per service."})
		fake.Put("globex", knowledge.Entry{Slug: "conventions/go", Title: "Globex secrets", Body: "error: globex only"})
		w := newFlowWorld(t, s, func(c *config.Config) { c.Knowledge.URL = fake.URL })
		w.Org("globex")
		k := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+k+"/flow/start", nil)
		r := w.leaseStage(k, "implement", 1)
		sess, err := connectMCP(t, w.Env, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		text, isErr := call(t, sess, "search_knowledge", map[string]any{"query": "error"})
		var found struct {
			Results []struct{ Space, Slug, Title, Snippet string }
		}
		if isErr || json.Unmarshal([]byte(text), &found) != nil || len(found.Results) != 1 || found.Results[0].Slug != "conventions/go" ||
			strings.Contains(text, "globex") || !strings.Contains(found.Results[0].Snippet, "<mark>error</mark>") {
			t.Fatalf("search_knowledge: %s", text)
		}
		if text, isErr := call(t, sess, "search_knowledge", map[string]any{"query": "error", "space": "ops", "tags": []string{}}); isErr ||
			!strings.Contains(text, `"slug":"deploy"`) || strings.Contains(text, "conventions") {
			t.Errorf("search_knowledge in ops: %s", text)
		}
		text, isErr = call(t, sess, "read_entry", map[string]any{"slug": "conventions/go"})
		var e struct {
			Space, Slug, Body string
			Version           int
		}
		if isErr || json.Unmarshal([]byte(text), &e) != nil || e.Version != 2 || e.Space != "default" || !strings.Contains(e.Body, "log it once") {
			t.Fatalf("read_entry: %s", text)
		}
		if text, isErr := call(t, sess, "read_entry", map[string]any{"slug": "conventions/go", "version": 1}); isErr || strings.Contains(text, "log it once") {
			t.Errorf("read_entry version 1: %s", text)
		}
		if text, isErr := call(t, sess, "read_entry", map[string]any{"slug": "deploy"}); !isErr || !strings.Contains(text, "not found") {
			t.Errorf("an entry of another space, read in default: %s", text)
		}
		for args, want := range map[string]map[string]any{
			"query: must not be empty": {"query": " "},
			"tags: at most 20":         {"query": "x", "tags": make([]string, 21)},
		} {
			if text, isErr := call(t, sess, "search_knowledge", want); !isErr || !strings.Contains(text, args) {
				t.Errorf("%v: %s", want, text)
			}
		}
		if text, isErr := call(t, sess, "read_entry", map[string]any{"slug": ""}); !isErr || !strings.Contains(text, "slug: must not be empty") {
			t.Errorf("empty slug: %s", text)
		}
		// A slug or space that is not one (".." once read the space's
		// metadata through a redirect) is refused naming it; no request
		// reaches the service.
		before := len(fake.Requests())
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"read_entry", map[string]any{"slug": ".."}, `slug: ".."`},
			{"read_entry", map[string]any{"slug": "guides/../.."}, `slug: "guides/../.."`},
			{"read_entry", map[string]any{"slug": "deploy", "space": ".."}, `space: ".."`},
			{"search_knowledge", map[string]any{"query": "x", "space": ".."}, `space: ".."`},
		} {
			if text, isErr := call(t, sess, c.tool, c.args); !isErr || !strings.Contains(text, c.want) {
				t.Errorf("%s %v: %s; want an error naming %s", c.tool, c.args, text, c.want)
			}
		}
		if n := len(fake.Requests()) - before; n != 0 {
			t.Errorf("%d requests with bad slugs reached the service", n)
		}
		// Every call was scoped to acme, with the service credential.
		for _, req := range fake.Requests() {
			if !strings.HasPrefix(req.URL.Path, "/api/v1/knowledge/orgs/acme/") || req.Header.Get("Authorization") != "Bearer "+apitest.ServiceToken {
				t.Errorf("a call to %s with %q", req.URL.Path, req.Header.Get("Authorization"))
			}
		}
		// The service down: a tool error the agent can read; the session
		// goes on (its other tools answer, its report is taken).
		fake.SetDown(true)
		for _, tool := range []string{"search_knowledge", "read_entry"} {
			text, isErr := call(t, sess, tool, map[string]any{"query": "error", "slug": "conventions/go"})
			if !isErr || !strings.Contains(text, "unavailable right now") || strings.Contains(text, fake.URL) {
				t.Errorf("%s with the service down: %s", tool, text)
			}
		}
		if v := getTicket(t, sess); v.Ticket.Key != k {
			t.Errorf("get_ticket after a failed knowledge call: %+v", v)
		}
		if text, isErr := call(t, sess, "submit_report", map[string]any{"outcome": "done", "summary": "did it"}); isErr {
			t.Errorf("submit_report: %s", text)
		}
		if strings.Contains(w.Logs(), apitest.ServiceToken) {
			t.Error("Core logged the service credential")
		}
	})
}
