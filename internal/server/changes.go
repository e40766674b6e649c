package server

import (
	"net/http"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/changes"
)

// Changes serves what a ticket's branch changes against its base.
type Changes struct {
	S *changes.Service
}

// Routes returns the changes endpoint.
func (h *Changes) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/items/{item}/changes", Perm: access.TrackerRead,
			Summary:  "The ticket's branch against its base: head, commits (with the stage and run that made them), files with their patches, the pull request with its checks and reviews (409 when the project has no repository, 503 with the forge's words when the forge cannot be read)",
			Response: changes.Changes{}, Also: []int{http.StatusConflict}, Handle: h.get},
	}
}

func (h *Changes) get(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	return h.S.Changes(r.Context(), it)
}
