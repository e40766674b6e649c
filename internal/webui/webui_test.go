package webui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/server"
)

// serve builds the UI with the embedded build in front of Core's real
// server (its probes, its one 404 shape) and answers one request.
func serve(t *testing.T, cfg Config, method, target, accept string) *http.Response {
	t.Helper()
	api := server.New(slog.New(slog.DiscardHandler), okPinger{}, prometheus.NewRegistry(), nil, nil)
	h, err := New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

type okPinger struct{}

func (okPinger) Ping(context.Context) error { return nil }

const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantAPIError checks the API's one error shape.
func wantAPIError(t *testing.T, res *http.Response, status int, code string) {
	t.Helper()
	b := body(t, res)
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", res.StatusCode, status, b)
	}
	var e server.ErrorBody
	if err := json.Unmarshal([]byte(b), &e); err != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("body %q is not the API's error shape with code %q (%v)", b, code, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
}

func TestPageForEveryAppRoute(t *testing.T) {
	for _, p := range []string{"/", "/signin", "/needs-me", "/orgs", "/projects/ACME", "/projects/ACME/pipelines?name=bug",
		"/projects/ACME/settings", "/items/ACME-1", "/platform", "/notifications?filter=unread", "/orgs/acme/knowledge/eng/setup", "/no/such/page"} {
		for _, accept := range []string{browser, "text/html"} {
			res := serve(t, Config{}, http.MethodGet, p, accept)
			b := body(t, res)
			if res.StatusCode != http.StatusOK || !strings.Contains(b, `<div id="app">`) {
				t.Fatalf("GET %s (Accept %q): %d, want the page: %.200s", p, accept, res.StatusCode, b)
			}
			for k, want := range map[string]string{
				"Content-Type":            "text/html; charset=utf-8",
				"Cache-Control":           "no-cache",
				"X-Frame-Options":         "DENY",
				"Content-Security-Policy": contentSecurityPolicy,
			} {
				if got := res.Header.Get(k); got != want {
					t.Fatalf("GET %s: %s %q, want %q", p, k, got, want)
				}
			}
		}
	}
}

func TestAPIAndProbePathsPassThrough(t *testing.T) {
	// The API's own paths answer as the API does, even to a browser.
	for _, p := range []string{"/api/v1/nothing", "/api/", "/api", "/auth/oidc/login", "/auth"} {
		wantAPIError(t, serve(t, Config{}, http.MethodGet, p, browser), http.StatusNotFound, "not_found")
	}
	res := serve(t, Config{}, http.MethodGet, "/healthz", browser)
	if b := body(t, res); res.StatusCode != http.StatusOK || !strings.Contains(b, `"status":"ok"`) {
		t.Fatalf("GET /healthz: %d %s", res.StatusCode, b)
	}
	res = serve(t, Config{}, http.MethodGet, "/metrics", browser)
	if b := body(t, res); res.StatusCode != http.StatusOK || strings.Contains(b, `id="app"`) {
		t.Fatalf("GET /metrics: %d %.100s", res.StatusCode, b)
	}
	// Writes are never the page's, nor is a request that wants no HTML.
	wantAPIError(t, serve(t, Config{}, http.MethodPost, "/needs-me", browser), http.StatusNotFound, "not_found")
	wantAPIError(t, serve(t, Config{}, http.MethodGet, "/needs-me", "application/json"), http.StatusNotFound, "not_found")
	// Nor a script's or curl's (no Accept, or */*): an unknown path is the
	// API's 404 to them, not a 200 page.
	for _, accept := range []string{"", "*/*"} {
		wantAPIError(t, serve(t, Config{}, http.MethodGet, "/nope", accept), http.StatusNotFound, "not_found")
	}
}

func TestAssetsAreCachedForGood(t *testing.T) {
	page := body(t, serve(t, Config{}, http.MethodGet, "/", browser))
	refs := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) == 0 {
		t.Fatalf("the page names no asset: %s", page)
	}
	for _, m := range refs {
		res := serve(t, Config{}, http.MethodGet, m[1], "*/*")
		b := body(t, res)
		if res.StatusCode != http.StatusOK || len(b) == 0 {
			t.Fatalf("GET %s: %d", m[1], res.StatusCode)
		}
		if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Fatalf("GET %s: Cache-Control %q", m[1], cc)
		}
		ct := res.Header.Get("Content-Type")
		if strings.HasSuffix(m[1], ".js") && !strings.HasPrefix(ct, "text/javascript") || strings.HasSuffix(m[1], ".css") && !strings.HasPrefix(ct, "text/css") {
			t.Fatalf("GET %s: Content-Type %q", m[1], ct)
		}
	}
}

func TestMissingAssetIsTheAPIs404(t *testing.T) {
	for _, p := range []string{"/assets/nothing-1234.js", "/assets/", "/assets/sub/nothing.css"} {
		wantAPIError(t, serve(t, Config{}, http.MethodGet, p, browser), http.StatusNotFound, "not_found")
	}
	// A path that leaves assets/ is no asset: never the page cached for good
	// (Core's mux redirects it to its clean form).
	for _, p := range []string{"/assets/../index.html", "/assets/%2e%2e/index.html", "/assets/./../index.html"} {
		res := serve(t, Config{}, http.MethodGet, p, browser)
		if res.StatusCode == http.StatusOK || strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Fatalf("GET %s: %d, Cache-Control %q: served as an asset", p, res.StatusCode, res.Header.Get("Cache-Control"))
		}
	}
}

// configOf reads the configuration the page carries.
func configOf(t *testing.T, page string) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`<script type="application/json" id="ballet-config">(.*?)</script>`).FindAllStringSubmatch(page, -1)
	if len(m) != 1 {
		t.Fatalf("want one configuration script, got %d: %s", len(m), page)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(m[0][1]), &cfg); err != nil {
		t.Fatalf("configuration %q: %v", m[0][1], err)
	}
	return cfg
}

func TestConfigInjected(t *testing.T) {
	for _, oidc := range []bool{false, true} {
		cfg := configOf(t, body(t, serve(t, Config{OIDC: oidc}, http.MethodGet, "/items/ACME-1", browser)))
		if cfg["oidc"] != oidc {
			t.Fatalf("OIDC %v: the page says %v", oidc, cfg)
		}
	}
}

func TestABuildWithoutItsConfigSlotIsRefused(t *testing.T) {
	next := http.NotFoundHandler()
	for name, page := range map[string]string{
		"none": `<html><body><div id="app"></div></body></html>`,
		"two":  string(configSlot) + string(configSlot),
	} {
		_, err := newHandler(next, fstest.MapFS{"index.html": {Data: []byte(page)}}, Config{})
		if err == nil || !strings.Contains(err.Error(), "ballet-config") {
			t.Fatalf("%s: err %v, want one naming the slot", name, err)
		}
	}
	if _, err := newHandler(next, fstest.MapFS{}, Config{}); err == nil || !strings.Contains(err.Error(), "npm run build") {
		t.Fatalf("no index.html: err %v", err)
	}
}
