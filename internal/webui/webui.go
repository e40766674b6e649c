// Package webui serves Ballet's web UI: the single-page application built
// from web/ (Vite) into dist/ and embedded in the binary, so Core serves it
// without Node. Hashed assets are cached for good; the page itself is never
// cached, and any path the API does not own answers the page to a browser so
// that the application's own routes survive a reload. The page carries the
// browser's configuration (Config) in <script id="ballet-config">.
package webui

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// Handler serves the UI, passing every request it does not own to next (the
// API, probes, metrics).
type Handler struct {
	next   http.Handler
	assets fs.FS
	index  []byte
}

// Config is what the browser learns from Core before its first request
// (web/src/session.ts reads it).
type Config struct {
	// OIDC: the sign-in page offers "Sign in with OIDC" ([auth] oidc_client_id is set).
	OIDC bool `json:"oidc"`
}

// configSlot is the placeholder web/index.html carries for Config.
var configSlot = []byte(`<script type="application/json" id="ballet-config">{}</script>`)

// New returns the UI handler in front of next, its page carrying cfg. It
// fails when the embedded build is missing its page (a binary built without
// `npm run build`).
func New(next http.Handler, cfg Config) (*Handler, error) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	return newHandler(next, sub, cfg)
}

func newHandler(next http.Handler, assets fs.FS, cfg Config) (*Handler, error) {
	page, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		return nil, fmt.Errorf("webui: the embedded build has no index.html (run npm run build in web/): %w", err)
	}
	index, err := inject(page, cfg)
	if err != nil {
		return nil, err
	}
	return &Handler{next: next, assets: assets, index: index}, nil
}

// inject writes cfg into the page's configuration slot. json.Marshal
// escapes <, > and &, so the JSON cannot end the script element.
func inject(page []byte, cfg Config) ([]byte, error) {
	if bytes.Count(page, configSlot) != 1 {
		return nil, errors.New("webui: index.html must hold exactly one " + string(configSlot) + " (web/index.html)")
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("webui: the browser's configuration: %w", err)
	}
	slot := bytes.Replace(configSlot, []byte(">{}<"), append(append([]byte(">"), js...), '<'), 1)
	return bytes.Replace(page, configSlot, slot, 1), nil
}

// apiPrefixes are the paths the UI never answers.
var apiPrefixes = []string{"/api/", "/auth/", "/healthz", "/readyz", "/metrics"}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.next.ServeHTTP(w, r)
		return
	}
	for _, pre := range apiPrefixes {
		if p == strings.TrimSuffix(pre, "/") || strings.HasPrefix(p, pre) {
			h.next.ServeHTTP(w, r)
			return
		}
	}
	if strings.HasPrefix(p, "/assets/") {
		h.asset(w, r)
		return
	}
	if !acceptsHTML(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	h.page(w)
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	f, err := fs.ReadFile(h.assets, name)
	if err != nil || !strings.HasPrefix(name, "assets/") { // /assets/../index.html is no asset
		h.next.ServeHTTP(w, r) // the API's one 404 shape
		return
	}
	// Vite names assets by content hash: a name never changes meaning.
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, zeroTime, bytes.NewReader(f))
}

// contentSecurityPolicy lets the page run only its own scripts and talk only
// to its own origin (the realtime WebSocket included). Styles may be inline:
// CodeMirror writes its own style elements.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: https:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

func (h *Handler) page(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.Header().Set("Referrer-Policy", "same-origin")
	_, _ = w.Write(h.index)
}

func acceptsHTML(r *http.Request) bool {
	// Browsers navigating ask for text/html; a script or curl (no Accept,
	// or */*) asking for a path the API does not know gets the API's 404.
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

var zeroTime = time.Time{}
