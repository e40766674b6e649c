package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/service"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

const serviceToken = "svc-0123456789abcdef0123456789abcdef"

// fakeCore honours Core's introspection contract: tokens map to answers;
// down makes it fail like a stopped Core; calls counts the calls.
type fakeCore struct {
	mu     sync.Mutex
	tokens map[string]service.IntrospectResponse
	down   atomic.Bool
	calls  atomic.Int64
	srv    *httptest.Server
}

func newFakeCore(t testing.TB) *fakeCore {
	f := &fakeCore{tokens: map[string]service.IntrospectResponse{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close() // as if nothing listened
			return
		}
		f.calls.Add(1)
		if r.Method != "POST" || r.URL.Path != service.IntrospectPath || r.Header.Get("Authorization") != "Bearer "+serviceToken {
			http.Error(w, `{"error":{"code":"unauthenticated","message":"no"}}`, 401)
			return
		}
		var in service.IntrospectRequest
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "bad", 400)
			return
		}
		f.mu.Lock()
		ans, ok := f.tokens[in.Credential]
		f.mu.Unlock()
		if !ok {
			ans = service.IntrospectResponse{Active: false}
		}
		json.NewEncoder(w).Encode(ans)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCore) person(token, sub string, orgs map[string]string) {
	ans := service.IntrospectResponse{Active: true, Subject: sub, Name: sub, Kind: "human"}
	for slug, role := range orgs {
		ans.Orgs = append(ans.Orgs, service.IntrospectOrg{Slug: slug, ID: "id-" + slug, Role: role})
	}
	f.mu.Lock()
	f.tokens[token] = ans
	f.mu.Unlock()
}

func (f *fakeCore) revoke(token string) {
	f.mu.Lock()
	delete(f.tokens, token)
	f.mu.Unlock()
}

type env struct {
	t    testing.TB
	core *fakeCore
	clk  *clock.Fake
	h    http.Handler
	doc  *openapitest.Doc
}

func newEnv(t testing.TB, s store.Store) *env {
	core := newFakeCore(t)
	cfg := config.KnowledgeDefault()
	cfg.Knowledge.Core = core.srv.URL
	cfg.Knowledge.ServiceToken = serviceToken
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	srv, err := service.Open(t.Context(), service.Options{Config: cfg, Clock: clk, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/knowledge/openapi.json", nil))
	doc, err := openapitest.Load(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	core.person("ann-token", "ann", map[string]string{"acme": "admin"})
	core.person("mia-token", "mia", map[string]string{"acme": "member"})
	core.person("vic-token", "vic", map[string]string{"acme": "viewer"})
	core.person("oto-token", "oto", map[string]string{"other": "admin"})
	return &env{t: t, core: core, clk: clk, h: srv.Handler(), doc: doc}
}

// do sends a request and checks the answer against the OpenAPI document.
func (e *env) do(token, method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	r := httptest.NewRequest(method, path, rd)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	if e.doc.Documented(r) {
		if err := e.doc.Response(r, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			e.t.Error(err)
		}
	}
	var out map[string]any
	json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func (e *env) must(want int, token, method, path string, body any) map[string]any {
	e.t.Helper()
	code, out := e.do(token, method, path, body)
	if code != want {
		e.t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

const base = "/api/v1/knowledge/orgs/acme"

// TestRESTRoundTrip drives every route once through the REST API on both
// engines, every answer checked against the served OpenAPI document.
func TestRESTRoundTrip(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		e := newEnv(t, s)
		sp := e.must(200, "vic-token", "GET", base+"/spaces", nil)
		if got := sp["spaces"].([]any); len(got) != 1 || got[0].(map[string]any)["slug"] != "default" {
			t.Fatalf("spaces: %v", sp)
		}
		e.must(201, "ann-token", "POST", base+"/spaces", map[string]any{"slug": "ops", "title": "Operations"})
		ent := e.must(201, "mia-token", "POST", base+"/spaces/ops/entries", map[string]any{"slug": "run/books", "title": "Runbooks", "body": "Page <b>someone</b>.", "tags": []string{"oncall"}})
		if ent["version"] != 1.0 || ent["space"] != "ops" || ent["updated_by"] != "mia" || ent["deleted"] != false {
			t.Fatalf("created: %v", ent)
		}
		path := base + "/spaces/ops/entries/run%2Fbooks"
		e.must(200, "vic-token", "GET", path, nil)
		e.must(200, "mia-token", "PUT", path, map[string]any{"version": 1, "title": "Runbooks", "body": "Page the on-call person.", "note": "who"})
		conflict := e.must(409, "ann-token", "PUT", path, map[string]any{"version": 1, "title": "Runbooks", "body": "stale"})
		if conflict["error"].(map[string]any)["code"] != "conflict" {
			t.Fatalf("409 body: %v", conflict)
		}
		e.must(400, "ann-token", "PUT", path, map[string]any{"title": "Runbooks", "body": "no version"})
		old := e.must(200, "vic-token", "GET", path+"?version=1", nil)
		if old["body"] != "Page <b>someone</b>." {
			t.Fatalf("version 1: %v", old)
		}
		vs := e.must(200, "vic-token", "GET", path+"/versions", nil)["versions"].([]any)
		if len(vs) != 2 || vs[0].(map[string]any)["version"] != 2.0 || vs[0].(map[string]any)["note"] != "who" {
			t.Fatalf("versions: %v", vs)
		}
		d := e.must(200, "vic-token", "GET", path+"/diff?from=1&to=2", nil)
		if !strings.Contains(d["diff"].(string), "-Page <b>someone</b>.\n+Page the on-call person.\n") {
			t.Fatalf("diff: %v", d)
		}
		e.must(200, "mia-token", "POST", path+"/restore", map[string]any{"version": 1, "based_on": 2})
		e.must(409, "mia-token", "POST", path+"/restore", map[string]any{"version": 1, "based_on": 2})
		hits := e.must(200, "vic-token", "GET", base+"/search?q=someone&tag=oncall", nil)["results"].([]any)
		if len(hits) != 1 || hits[0].(map[string]any)["snippet"] != "Page &lt;b&gt;<mark>someone</mark>&lt;/b&gt;." {
			t.Fatalf("search: %v", hits)
		}
		del := e.must(200, "mia-token", "DELETE", path, nil)
		if del["deleted"] != true {
			t.Fatalf("delete: %v", del)
		}
		if hits := e.must(200, "vic-token", "GET", base+"/search?q=someone", nil)["results"].([]any); len(hits) != 0 {
			t.Fatalf("search after delete: %v", hits)
		}
		e.must(200, "mia-token", "POST", path+"/undelete", nil)
		list := e.must(200, "vic-token", "GET", base+"/spaces/ops/entries?tag=OnCall", nil)["entries"].([]any)
		if len(list) != 1 {
			t.Fatalf("entries: %v", list)
		}
		hist := e.must(200, "vic-token", "GET", path+"/history", nil)["events"].([]any)
		var types []string
		for _, ev := range hist {
			types = append(types, ev.(map[string]any)["type"].(string))
			if err := e.doc.Event(mustJSON(ev)); err != nil {
				t.Error(err)
			}
		}
		if strings.Join(types, " ") != "entry.created entry.updated entry.restored entry.deleted entry.undeleted" {
			t.Fatalf("history: %v", types)
		}
		// The service credential reads every organization, writes none.
		e.must(200, serviceToken, "GET", path, nil)
		e.must(200, serviceToken, "GET", "/api/v1/knowledge/orgs/other/spaces", nil)
		e.must(403, serviceToken, "PUT", path, map[string]any{"version": 3, "title": "x", "body": "y"})
		// Another organization's admin sees nothing of acme's.
		e.must(404, "oto-token", "GET", path, nil)
		e.must(404, "oto-token", "GET", base+"/search?q=someone", nil)
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestBadRequestsAre4xx: strict bodies and query parameters answer 400/413
// naming the field, never 500.
func TestBadRequestsAre4xx(t *testing.T) {
	e := newEnv(t, storetest.OpenWith(t, "sqlite", knowledge.Migrations))
	for _, c := range []struct {
		method, path string
		body         any
		want         int
		mention      string
	}{
		{"POST", base + "/spaces/default/entries", `{"slug":"a","title":"t","body":"b","extra":1}`, 400, "extra"},
		{"POST", base + "/spaces/default/entries", `{"slug":"a","title":"t","body":"b","Title":"x"}`, 400, "Title"},
		{"POST", base + "/spaces/default/entries", `{"slug":"a","title":1}`, 400, "title"},
		{"POST", base + "/spaces/default/entries", `{"slug":"a","title":"t","body":"b"} x`, 400, ""},
		{"POST", base + "/spaces/default/entries", `{"slug":"a b","title":"t","body":"b"}`, 400, "slug"},
		{"POST", base + "/spaces/default/entries", `{"slug":"a","title":"t","body":"` + strings.Repeat("x", 2<<20) + `"}`, 413, ""},
		{"GET", base + "/search?q=", nil, 400, "q"},
		{"GET", base + "/search?q=a&limit=0", nil, 400, "limit"},
		{"GET", base + "/search?q=a&include_deleted=yes", nil, 400, "include_deleted"},
		{"GET", base + "/search?q=a&space=Bad!", nil, 400, "space"},
		{"GET", base + "/search?q=a&tag=no+spaces", nil, 400, "tag[0]"},
		{"GET", base + "/spaces/default/entries?tag=no+spaces", nil, 400, "tag[0]"},
		{"GET", base + "/spaces/default/entries/x?version=abc", nil, 400, "version"},
		{"GET", base + "/spaces/default/entries/x/diff?from=1", nil, 400, "from"},
		{"POST", base + "/spaces/default/entries/x/restore", `{"version":1}`, 400, "based_on"},
	} {
		code, out := e.do("ann-token", c.method, c.path, c.body)
		msg, _ := json.Marshal(out)
		if code != c.want || !strings.Contains(string(msg), c.mention) {
			t.Errorf("%s %.80s: %d %s, want %d naming %q", c.method, c.path, code, msg, c.want, c.mention)
		}
	}
	if code, _ := e.do("", "GET", base+"/spaces", nil); code != 401 {
		t.Errorf("no credential: %d", code)
	}
	if code, _ := e.do("nobody", "GET", base+"/spaces", nil); code != 401 {
		t.Errorf("an unknown credential: %d", code)
	}
}

// TestAuthorizationMatrix: every route for every role: viewers read,
// members write, admins manage spaces, the service credential reads only,
// and a caller without a role in the organization gets 404.
func TestAuthorizationMatrix(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", knowledge.Migrations)
	e := newEnv(t, s)
	roles := map[string]string{"vic-token": "viewer", "mia-token": "member", "ann-token": "admin", serviceToken: "service", "oto-token": "none"}
	allowed := func(role string, p service.Perm) bool {
		switch role {
		case "admin":
			return true
		case "member":
			return p != service.Manage
		case "viewer", "service":
			return p == service.Read
		}
		return false
	}
	routes := e.routes()
	if len(routes) < 14 {
		t.Fatalf("%d routes", len(routes))
	}
	for _, rt := range routes {
		path := strings.NewReplacer("{org}", "acme", "{space}", "default", "{slug}", "x").Replace(service.Prefix + rt.Path)
		for token, role := range roles {
			code, out := e.do(token, rt.Method, path, "{}")
			msg, _ := json.Marshal(out)
			switch {
			case role == "none":
				if code != 404 || !strings.Contains(string(msg), `organization \"acme\" not found`) {
					t.Errorf("%s %s as %s: %d %s, want 404", rt.Method, rt.Path, role, code, msg)
				}
			case !allowed(role, rt.Perm):
				if code != 403 {
					t.Errorf("%s %s as %s: %d %s, want 403", rt.Method, rt.Path, role, code, msg)
				}
			default:
				if code == 401 || code == 403 || strings.Contains(string(msg), `organization \"acme\" not found`) || code >= 500 {
					t.Errorf("%s %s as %s: %d %s, want access", rt.Method, rt.Path, role, code, msg)
				}
			}
		}
	}
}

func (e *env) routes() []*service.Route {
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/knowledge/openapi.json", nil))
	var doc struct {
		Paths map[string]map[string]struct {
			Perm string `json:"x-permission"`
		} `json:"paths"`
	}
	json.Unmarshal(rec.Body.Bytes(), &doc)
	var out []*service.Route
	for p, ops := range doc.Paths {
		for m, op := range ops {
			out = append(out, &service.Route{Method: strings.ToUpper(m), Path: strings.TrimPrefix(p, service.Prefix), Perm: service.Perm(op.Perm)})
		}
	}
	return out
}

// TestCredentialCache: Core's answers are used for at most auth_cache: a
// revoked token works until then and not after; while Core is down a
// cached credential works until its bound and an unknown one gets 503.
func TestCredentialCache(t *testing.T) {
	e := newEnv(t, storetest.OpenWith(t, "sqlite", knowledge.Migrations))
	ttl := config.KnowledgeDefault().Knowledge.AuthCache.Duration
	e.must(200, "vic-token", "GET", base+"/spaces", nil)
	calls := e.core.calls.Load()
	e.must(200, "vic-token", "GET", base+"/spaces", nil)
	if e.core.calls.Load() != calls {
		t.Fatal("a cached credential was introspected again within its bound")
	}
	// Revoked in Core: still served from the cache just before the bound,
	// refused at it.
	e.core.revoke("vic-token")
	e.clk.Advance(ttl - time.Millisecond)
	e.must(200, "vic-token", "GET", base+"/spaces", nil)
	e.clk.Advance(time.Millisecond)
	e.must(401, "vic-token", "GET", base+"/spaces", nil)

	// Core down: a cached credential keeps working until its bound.
	e.must(200, "mia-token", "GET", base+"/spaces", nil)
	e.core.down.Store(true)
	e.must(503, "ann-token", "GET", base+"/spaces", nil) // never seen: Core must answer
	e.clk.Advance(ttl - time.Millisecond)
	e.must(200, "mia-token", "GET", base+"/spaces", nil)
	e.clk.Advance(time.Millisecond)
	e.must(503, "mia-token", "GET", base+"/spaces", nil)
	// Core back: answered again.
	e.core.down.Store(false)
	e.must(200, "mia-token", "GET", base+"/spaces", nil)
}

// TestCacheIsBounded: past MaxEntries the oldest answers go.
func TestCacheIsBounded(t *testing.T) {
	core := newFakeCore(t)
	clk := clock.NewFake(time.Now())
	a := &service.Authenticator{Core: core.srv.URL, ServiceToken: serviceToken, TTL: time.Minute, MaxEntries: 3, Client: core.srv.Client(), Clock: clk}
	for _, tok := range []string{"a", "b", "c", "d"} {
		core.person(tok, tok, map[string]string{"acme": "viewer"})
		clk.Advance(time.Second)
		if _, err := a.Authenticate(t.Context(), "Bearer "+tok); err != nil {
			t.Fatal(err)
		}
	}
	calls := core.calls.Load()
	for _, tok := range []string{"b", "c", "d"} {
		a.Authenticate(t.Context(), "Bearer "+tok)
	}
	if core.calls.Load() != calls {
		t.Fatal("a recent answer was evicted")
	}
	a.Authenticate(t.Context(), "Bearer a")
	if core.calls.Load() != calls+1 {
		t.Fatal("the oldest answer was kept beyond the bound")
	}
}

// TestNeverOpensCoresDatabase: the service runs with Core's data folder
// unreadable (mode 000) beside its own, and no file of that folder is
// ever open in the process.
func TestNeverOpensCoresDatabase(t *testing.T) {
	dir := t.TempDir()
	coreData := filepath.Join(dir, "core-data")
	if err := os.MkdirAll(coreData, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(coreData, "core.db"), []byte("Core's, not ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(coreData, 0)
	t.Cleanup(func() { os.Chmod(coreData, 0o755) })
	core := newFakeCore(t)
	core.person("ann-token", "ann", map[string]string{"acme": "admin"})
	cfg := config.KnowledgeDefault()
	cfg.Storage.Path = filepath.Join(dir, "knowledge-data", "knowledge.db")
	cfg.Knowledge.Core, cfg.Knowledge.ServiceToken = core.srv.URL, serviceToken
	srv, err := service.Open(t.Context(), service.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	e := &env{t: t, core: core, h: srv.Handler()}
	e.doc, _ = openapitest.Load(mustGet(t, srv.Handler(), "/api/v1/knowledge/openapi.json"))
	e.must(201, "ann-token", "POST", base+"/spaces/default/entries", map[string]any{"slug": "a", "title": "A", "body": "b"})
	e.must(200, "ann-token", "GET", base+"/search?q=b", nil)
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if strings.HasPrefix(target, coreData) {
			t.Errorf("the process holds %s open", target)
		}
	}
	if _, err := os.Stat(cfg.Storage.Path); err != nil {
		t.Fatalf("its own database: %v", err)
	}
}

func mustGet(t *testing.T, h http.Handler, path string) []byte {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Body.Bytes()
}

// blockingCore is a transport to a fake Core that answers only when
// released, counting the calls.
type blockingCore struct {
	release chan struct{}
	calls   atomic.Int64
}

func (b *blockingCore) RoundTrip(r *http.Request) (*http.Response, error) {
	b.calls.Add(1)
	<-b.release
	body := `{"active":true,"subject":"ann","kind":"human","orgs":[{"slug":"acme","id":"x","role":"viewer"}]}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestConcurrentFirstRequestsShareOneIntrospection: requests arriving
// together with one new credential (a page's first requests) make one
// call to Core, and all get its answer.
func TestConcurrentFirstRequestsShareOneIntrospection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := &blockingCore{release: make(chan struct{})}
		a := &service.Authenticator{Core: "http://core.invalid", ServiceToken: serviceToken, TTL: time.Minute,
			Client: &http.Client{Transport: core}, Clock: clock.NewFake(time.Now())}
		const n = 8
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := a.Authenticate(context.Background(), "Bearer new-session")
				if err != nil || p.Subject != "ann" || p.Role("acme") != "viewer" {
					t.Errorf("%+v %v", p, err)
				}
			}()
		}
		synctest.Wait() // every request is waiting: on Core, or on the call in flight
		if c := core.calls.Load(); c != 1 {
			t.Fatalf("%d requests made %d calls to Core, want 1", n, c)
		}
		close(core.release)
		wg.Wait()
	})
}

// TestCachedAnswerEndsWithTheCredential: an answer is not used past the
// credential's expiry that Core stated, even within auth_cache.
func TestCachedAnswerEndsWithTheCredential(t *testing.T) {
	e := newEnv(t, storetest.OpenWith(t, "sqlite", knowledge.Migrations))
	expires := e.clk.Now().Add(10 * time.Second)
	e.core.mu.Lock()
	ans := e.core.tokens["vic-token"]
	ans.ExpiresAt = &expires
	e.core.tokens["vic-token"] = ans
	e.core.mu.Unlock()
	e.must(200, "vic-token", "GET", base+"/spaces", nil)
	e.core.revoke("vic-token") // Core now says: not active (expired)
	e.clk.Advance(10*time.Second - time.Millisecond)
	e.must(200, "vic-token", "GET", base+"/spaces", nil)
	e.clk.Advance(time.Millisecond)
	e.must(401, "vic-token", "GET", base+"/spaces", nil)
}
