// Package webui serves Ballet's web UI: the single-page application built
// from web/ (Vite) into dist/ and embedded in the binary, so Core serves it
// without Node. Hashed assets are cached for good; the page itself is never
// cached, and any path the API does not own answers the page to a browser so
// that the application's own routes survive a reload.
package webui

import (
	"bytes"
	"embed"
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

// New returns the UI handler in front of next. It fails when the embedded
// build is missing its page (a binary built without `npm run build`).
func New(next http.Handler) (*Handler, error) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		return nil, fmt.Errorf("webui: the embedded build has no index.html (run npm run build in web/): %w", err)
	}
	return &Handler{next: next, assets: sub, index: index}, nil
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
	if err != nil {
		h.next.ServeHTTP(w, r) // the API's one 404 shape
		return
	}
	// Vite names assets by content hash: a name never changes meaning.
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, zeroTime, bytes.NewReader(f))
}

func (h *Handler) page(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(h.index)
}

func acceptsHTML(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return a == "" || strings.Contains(a, "text/html") || strings.Contains(a, "*/*")
}

var zeroTime = time.Time{}
