package server

import (
	"context"
	"strings"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/door"
	"github.com/ballet/ballet/internal/openapi"
)

// Digest serves the caller's current digest: what their next one would
// contain now, as JSON or as a page of HTML for the web UI.
type Digest struct {
	P DigestPreviewer
}

// DigestPreviewer builds a person's current digest (digest.Preview).
type DigestPreviewer interface {
	Current(ctx context.Context, p access.Principal, subject string) (digest.Digest, error)
}

// Routes returns the digest endpoint.
func (h *Digest) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/me/digest", Perm: access.Authenticated,
			Summary: "The caller's current digest: what their next one would contain now (what needs them, oldest wait first; tickets " +
				"done and pull requests merged, flows failed or stuck since their last digest; spend against budget per project), only " +
				"of the projects the caller may read; as a page of HTML with ?format=html or when Accept prefers text/html",
			Query:    []openapi.Param{{Name: "format", Type: "string", Description: "json (the default, unless Accept prefers text/html) or html"}},
			Response: digest.Digest{}, HTML: true, Handle: h.get},
	}
}

func (h *Digest) get(r *Request) (any, error) {
	r.Checked() // the caller's own, filtered by what it may read
	var html bool
	switch f := r.URL.Query().Get("format"); f {
	case "":
		html = prefersHTML(r.Header.Get("Accept"))
	case "json":
	case "html":
		html = true
	default:
		return nil, apperr.New(apperr.Invalid, "format: %q is neither json nor html", f)
	}
	d, err := h.P.Current(r.Context(), r.Principal, person(r))
	if err != nil || !html {
		return d, err
	}
	page, err := digest.HTML(d)
	if err != nil {
		return nil, err
	}
	return door.HTMLPage(page), nil
}

// prefersHTML tells whether an Accept header names text/html first (a
// browser's navigation), before any JSON.
func prefersHTML(accept string) bool {
	first, _, _ := strings.Cut(accept, ",")
	mt, _, _ := strings.Cut(first, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/html")
}
