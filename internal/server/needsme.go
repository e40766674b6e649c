package server

import (
	"context"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/needsme"
)

// NeedsMe serves what waits for the caller across the projects it may read.
type NeedsMe struct {
	L NeedsMeLister
}

// NeedsMeLister lists what waits for a principal (needsme.Service).
type NeedsMeLister interface {
	List(ctx context.Context, p access.Principal, limit int) (needsme.List, error)
}

// Routes returns the needs-me endpoint.
func (h *NeedsMe) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/needs-me", Perm: access.Authenticated,
			Summary: "What waits for a person across the projects the caller may read, oldest first (questions, approvals, reviews, merges, " +
				"stuck and no_runner flows, budget and pause waits; ?limit= 1–500, truncated when there is more)",
			Response: needsme.List{}, Handle: h.list},
	}
}

func (h *NeedsMe) list(r *Request) (any, error) {
	r.Checked() // filtered to what the caller may read
	limit, err := r.QueryInt("limit", needsme.DefaultLimit, 1, needsme.MaxLimit)
	if err != nil {
		return nil, err
	}
	return h.L.List(r.Context(), r.Principal, int(limit))
}
