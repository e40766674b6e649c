package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestKnowledgeProxySession: a request with a session cookie and no
// Authorization of its own reaches the service with the session's value
// as its bearer, once it passed the cross-origin check; a cross-origin
// write with the cookie is refused there, and never reaches the service.
func TestKnowledgeProxySession(t *testing.T) {
	var got []string
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.Header.Get("Authorization")+" cookie="+r.Header.Get("Cookie"))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer svc.Close()
	p, err := NewKnowledgeProxy(svc.URL, 1024, func(string) bool { return false }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.Session = func(r *http.Request) (string, bool) {
		c, err := r.Cookie("ballet_session")
		if err != nil {
			return "", false
		}
		return c.Value, true
	}
	send := func(method, site, authz string) int {
		r := httptest.NewRequest(method, "http://core.example/api/v1/knowledge/orgs/acme/spaces", strings.NewReader("{}"))
		r.Header.Set("Cookie", "ballet_session=sess-value")
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		return w.Code
	}
	if c := send("POST", "same-origin", ""); c != http.StatusNoContent {
		t.Errorf("same-origin write: %d", c)
	}
	if c := send("GET", "cross-site", ""); c != http.StatusNoContent {
		t.Errorf("cross-site read: %d", c)
	}
	if c := send("POST", "cross-site", ""); c != http.StatusForbidden {
		t.Errorf("cross-site write with the cookie: %d", c)
	}
	if c := send("POST", "cross-site", "Bearer own"); c != http.StatusNoContent {
		t.Errorf("cross-site write with a bearer of its own: %d", c)
	}
	want := []string{"POST Bearer sess-value cookie=", "GET Bearer sess-value cookie=", "POST Bearer own cookie="}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the service got %q, want %q", got, want)
	}
}
