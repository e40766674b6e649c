// Package clientfake is a small fake of the Knowledge service for Core's
// tests, honouring the contract Core relies on: entries per organization
// and space under /api/v1/knowledge/orgs/{org}/..., the service credential
// as a bearer, the one error shape, search with <mark> snippets. It runs on
// 127.0.0.1 and can be taken down and brought back.
package clientfake

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/knowledge/client"
)

// Fake is a running fake Knowledge service.
type Fake struct {
	URL   string
	Token string // the service credential it accepts

	mu       sync.Mutex
	entries  map[string][]client.Entry // org/space/slug → versions, oldest first
	down     bool
	requests []*http.Request // every request that reached the handler
	srv      *httptest.Server
}

// Start starts a fake accepting token; it stops when the test ends.
func Start(t testing.TB, token string) *Fake {
	f := &Fake{Token: token, entries: map[string][]client.Entry{}}
	f.srv = httptest.NewServer(f)
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// Put adds a version of an entry of org (space default when empty).
func (f *Fake) Put(org string, e client.Entry) {
	if e.Space == "" {
		e.Space = client.DefaultSpace
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := org + "/" + e.Space + "/" + e.Slug
	e.Version = int64(len(f.entries[k]) + 1)
	if e.Tags == nil {
		e.Tags = []string{}
	}
	f.entries[k] = append(f.entries[k], e)
}

// SetDown makes every request answer 503 (true) or brings it back.
func (f *Fake) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// Requests returns the requests it served so far.
func (f *Fake) Requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP answers the contract's read routes (with the service
// credential only) and echoes any other request (for the proxy's tests):
// its method, path, query, headers and body size.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Clone(r.Context()))
	down := f.down
	f.mu.Unlock()
	if down {
		writeErr(w, http.StatusServiceUnavailable, "unavailable", "down for the test")
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/knowledge/orgs/{org}/search", f.search)
	mux.HandleFunc("GET /api/v1/knowledge/orgs/{org}/spaces/{space}/entries/{slug}", f.entry)
	mux.HandleFunc("/", f.echo)
	mux.ServeHTTP(w, r)
}

// authorized answers 401 unless the request carries the service credential.
func (f *Fake) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+f.Token {
		writeErr(w, http.StatusUnauthorized, "unauthenticated", "unknown credential")
		return false
	}
	return true
}

func (f *Fake) entry(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	versions := f.entries[r.PathValue("org")+"/"+r.PathValue("space")+"/"+r.PathValue("slug")]
	f.mu.Unlock()
	if len(versions) == 0 {
		writeErr(w, http.StatusNotFound, "not_found", "entry "+strconv.Quote(r.PathValue("slug"))+" not found")
		return
	}
	e := versions[len(versions)-1]
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeErr(w, http.StatusBadRequest, "invalid", "version must be a positive integer")
			return
		}
		if n > len(versions) {
			writeErr(w, http.StatusNotFound, "not_found", "no version "+v)
			return
		}
		e = versions[n-1]
	}
	writeJSON(w, e)
}

func (f *Fake) search(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	if q == "" {
		writeErr(w, http.StatusBadRequest, "invalid", "q must not be empty")
		return
	}
	space, tags := r.URL.Query().Get("space"), r.URL.Query()["tag"]
	f.mu.Lock()
	defer f.mu.Unlock()
	results := []client.Result{}
	prefix := r.PathValue("org") + "/"
	for k, versions := range f.entries {
		e := versions[len(versions)-1]
		if !strings.HasPrefix(k, prefix) || (space != "" && e.Space != space) || !strings.Contains(strings.ToLower(e.Body+" "+e.Title), q) {
			continue
		}
		if !containsAll(e.Tags, tags) {
			continue
		}
		i := strings.Index(strings.ToLower(e.Body), q)
		snippet := html.EscapeString(e.Title)
		if i >= 0 {
			snippet = html.EscapeString(e.Body[:i]) + "<mark>" + html.EscapeString(e.Body[i:i+len(q)]) + "</mark>" + html.EscapeString(e.Body[i+len(q):])
		}
		results = append(results, client.Result{Space: e.Space, Slug: e.Slug, Title: e.Title, Version: e.Version, Tags: e.Tags, Snippet: snippet, Rank: -1})
	}
	slices.SortFunc(results, func(a, b client.Result) int { return strings.Compare(a.Slug, b.Slug) })
	writeJSON(w, map[string]any{"results": results})
}

func containsAll(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// echo answers what it received, for the proxy's tests.
func (f *Fake) echo(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(http.MaxBytesReader(w, r.Body, 64<<20))
	w.Header().Set("X-Fake", "echo")
	w.Header().Set("Set-Cookie", "fake=1; Path=/")
	writeJSON(w, map[string]any{"method": r.Method, "path": r.URL.Path, "raw_path": r.URL.RawPath, "query": r.URL.RawQuery,
		"headers": r.Header, "body_bytes": body.Len()})
}
