package server

import (
	"net/http"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
)

// Tokens serves service tokens: create (the secret is shown once), list,
// revoke. The scope of each call is the caller itself; auth.TokenService
// enforces who may create which token.
type Tokens struct {
	S *auth.TokenService
}

// TokenCreate is the body of POST /tokens.
type TokenCreate struct {
	Name         string   `json:"name"`
	Kind         string   `json:"kind,omitempty"`         // api (default) or runner
	Organization string   `json:"organization,omitempty"` // slug or id; api tokens
	Role         string   `json:"role,omitempty"`         // viewer, member, admin or platform_admin
	Scopes       []string `json:"scopes,omitempty"`
	ExpiresIn    string   `json:"expires_in,omitempty"` // Go duration, e.g. "720h"
}

// TokenList is the body of GET /tokens.
type TokenList struct {
	Tokens []auth.Token `json:"tokens"`
}

// Routes returns the token endpoints.
func (h *Tokens) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/tokens", Perm: access.Authenticated,
			Summary: "Create a service token (humans only; api tokens act in one organization with at most the creator's role; the secret is shown once)",
			Request: TokenCreate{}, Response: auth.CreatedToken{}, Status: http.StatusCreated, Handle: h.create},
		{Method: "GET", Path: "/api/v1/tokens", Perm: access.Authenticated, Summary: "List the caller's tokens (all for platform admins; ?kind=, ?limit=)",
			Response: TokenList{}, Handle: h.list},
		{Method: "DELETE", Path: "/api/v1/tokens/{id}", Perm: access.Authenticated, Summary: "Revoke a token (its creator or a platform admin)",
			Status: http.StatusNoContent, Handle: h.revoke},
	}
}

func (h *Tokens) create(r *Request) (any, error) {
	r.Checked() // TokenService.Create enforces the rules for the caller
	if err := auth.MayCreate(r.Principal); err != nil {
		return nil, err
	}
	var in TokenCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Create(r.Context(), r.Principal, auth.TokenInput(in))
}

func (h *Tokens) list(r *Request) (any, error) {
	r.Checked() // filtered to the caller's own tokens
	limit, err := r.QueryInt("limit", 100, 1, 1000)
	if err != nil {
		return nil, err
	}
	kind := r.URL.Query().Get("kind")
	switch kind {
	case "", auth.KindAPI, auth.KindRunner, auth.KindRun:
	default:
		return nil, apperr.Fields([]apperr.FieldError{{Field: "kind", Message: "must be api, runner or run"}})
	}
	ts, err := h.S.List(r.Context(), r.Principal, auth.TokenFilter{Kind: kind, Limit: int(limit)})
	return TokenList{Tokens: ts}, err
}

func (h *Tokens) revoke(r *Request) (any, error) {
	r.Checked() // only the creator or a platform admin finds the token
	return nil, h.S.Revoke(r.Context(), r.Principal, r.PathValue("id"))
}
