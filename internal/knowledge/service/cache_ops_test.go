package service_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/service"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestAFullCacheDropsExpiredAnswersFirst: when the cache is full, answers
// past their credential's expiry go first, and only if that frees no room
// the oldest live one.
func TestAFullCacheDropsExpiredAnswersFirst(t *testing.T) {
	core := newFakeCore(t)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	a := &service.Authenticator{Core: core.srv.URL, ServiceToken: serviceToken, TTL: time.Minute, MaxEntries: 3, Client: core.srv.Client(), Clock: clk}
	for i, tok := range []string{"a", "b", "c"} {
		core.person(tok, tok, map[string]string{"acme": "viewer"})
		if tok == "b" {
			exp := t0.Add(5 * time.Second)
			core.mu.Lock()
			ans := core.tokens[tok]
			ans.ExpiresAt = &exp
			core.tokens[tok] = ans
			core.mu.Unlock()
		}
		clk.Advance(time.Duration(i+1) * time.Second)
		if _, err := a.Authenticate(t.Context(), "Bearer "+tok); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(10 * time.Second) // b's credential has expired; a and c have not
	core.person("d", "d", map[string]string{"acme": "viewer"})
	if _, err := a.Authenticate(t.Context(), "Bearer d"); err != nil {
		t.Fatal(err)
	}
	calls := core.calls.Load()
	for _, tok := range []string{"a", "c", "d"} {
		if _, err := a.Authenticate(t.Context(), "Bearer "+tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := core.calls.Load() - calls; got != 0 {
		t.Errorf("%d live answers were asked again: the expired one should have made the room", got)
	}
}

// TestAServiceAnswerIsAService: an introspection answer of any kind but
// human acts as a service.
func TestAServiceAnswerIsAService(t *testing.T) {
	core := newFakeCore(t)
	core.mu.Lock()
	core.tokens["bot"] = service.IntrospectResponse{Active: true, Subject: "token:1", Kind: "robot"}
	core.mu.Unlock()
	a := &service.Authenticator{Core: core.srv.URL, ServiceToken: serviceToken, TTL: time.Minute, Client: core.srv.Client(), Clock: clock.NewFake(time.Now())}
	p, err := a.Authenticate(t.Context(), "Bearer bot")
	if err != nil || p.Kind != event.ActorService {
		t.Errorf("a robot's answer: %+v %v, want a service", p, err)
	}
}

// TestHealthReadinessAndUnknownRoutes: /healthz answers while the process
// runs, /readyz while the database can be read (503 once it cannot), and
// any other path is a 404 naming it.
func TestHealthReadinessAndUnknownRoutes(t *testing.T) {
	s := storetest.OpenWith(t, "sqlite", knowledge.Migrations)
	e := newEnv(t, s)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", http.StatusOK, `"ok"`},
		{"/readyz", http.StatusOK, `"ready"`},
		{"/nowhere", http.StatusNotFound, "no route for GET /nowhere"},
	} {
		if code, body := get(c.path); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %s, want %d with %s", c.path, code, body, c.code, c.body)
		}
	}
	s.Close()
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "unavailable") {
		t.Errorf("GET /readyz with the database closed: %d %s, want 503 unavailable", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz with the database closed: %d, want 200", code)
	}
}

// TestAnUnknownRoleIsNoRole: an organization Core lists with a role the
// Knowledge service does not know (a role added to Core later, or none)
// is one the caller is not in: 404 as for an organization that does not
// exist — not 403, which would tell that it does — and no access.
func TestAnUnknownRoleIsNoRole(t *testing.T) {
	e := newEnv(t, storetest.OpenWith(t, "sqlite", knowledge.Migrations))
	e.core.person("odd-token", "odd", map[string]string{"acme": "owner"})
	e.core.person("none-token", "none", map[string]string{"acme": ""})
	for _, tok := range []string{"odd-token", "none-token"} {
		e.must(404, tok, "GET", base+"/spaces", nil)
		e.must(404, tok, "POST", base+"/spaces", map[string]any{"slug": "x"})
	}
}

// TestTheDefaultCacheKeepsManyAnswers: an Authenticator without a bound
// of its own (MaxEntries 0) keeps every recent caller's answer, as its
// default of 10,000 says: a page's requests under two credentials do not
// each go to Core (which would make a slow or stopped Core everyone's
// outage at once).
func TestTheDefaultCacheKeepsManyAnswers(t *testing.T) {
	core := newFakeCore(t)
	a := &service.Authenticator{Core: core.srv.URL, ServiceToken: serviceToken, TTL: time.Minute, Client: core.srv.Client(), Clock: clock.NewFake(time.Now())}
	toks := []string{"a", "b", "c", "d", "e"}
	for _, tok := range toks {
		core.person(tok, tok, map[string]string{"acme": "viewer"})
		if _, err := a.Authenticate(t.Context(), "Bearer "+tok); err != nil {
			t.Fatal(err)
		}
	}
	calls := core.calls.Load()
	for _, tok := range toks {
		if _, err := a.Authenticate(t.Context(), "Bearer "+tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := core.calls.Load() - calls; got != 0 {
		t.Errorf("%d of %d recent answers were asked again", got, len(toks))
	}
}

// TestCoresBadAnswersAreUnavailableAndNotKept: when Core's introspection
// answers with an error status (a wrong service credential: the
// operator's problem, not the caller's), with something that is not JSON,
// or breaks its answer off, the caller gets 503 (try again), never 401
// (their credential is fine) nor access, and nothing is cached: once
// Core answers properly the same credential works at once.
func TestCoresBadAnswersAreUnavailableAndNotKept(t *testing.T) {
	good := `{"active":true,"subject":"ann","kind":"human","orgs":[{"slug":"acme","id":"x","role":"viewer"}]}`
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"401", func(w http.ResponseWriter) { http.Error(w, `{"active":true}`, http.StatusUnauthorized) }},
		{"500", func(w http.ResponseWriter) { http.Error(w, good, http.StatusInternalServerError) }},
		{"not JSON", func(w http.ResponseWriter) { w.Write([]byte("<html>proxy error</html>")) }},
		{"broken off", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte(good[:20]))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var bad atomic.Bool
			bad.Store(true)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if bad.Load() {
					c.answer(w)
					return
				}
				w.Write([]byte(good))
			}))
			t.Cleanup(srv.Close)
			a := &service.Authenticator{Core: srv.URL, ServiceToken: serviceToken, TTL: time.Minute, Client: srv.Client(), Clock: clock.NewFake(time.Now())}
			p, err := a.Authenticate(t.Context(), "Bearer ann-token")
			if apperr.Code(err) != apperr.Unavailable {
				t.Fatalf("%+v %v, want unavailable", p, err)
			}
			bad.Store(false)
			if p, err := a.Authenticate(t.Context(), "Bearer ann-token"); err != nil || p.Role("acme") != "viewer" {
				t.Errorf("once Core answers: %+v %v", p, err)
			}
		})
	}
}
