// Package service is the Knowledge service's HTTP side: its REST routes
// under /api/v1/knowledge/orgs/{org}/… (a route table that drives the mux,
// the OpenAPI document and the authorization-matrix test), strict request
// bodies, Core's one error shape, the callers' credentials resolved through
// Core's introspection (Authenticator) and the process around it (Run).
// It reads no database but its own.
package service

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/door"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/openapi"
)

// Perm is what a route needs in its organization.
type Perm string

// Permissions: viewers read, members write, admins manage spaces.
const (
	Read   Perm = "knowledge.read"
	Write  Perm = "knowledge.write"
	Manage Perm = "knowledge.manage"
)

var permRole = map[Perm]string{Read: RoleViewer, Write: RoleMember, Manage: RoleAdmin}

// Route is one REST endpoint (door.Route), its Path below Prefix.
type Route = door.Route[*Request, Perm]

// QueryParam documents a query parameter.
type QueryParam = openapi.Param

// Prefix is where every route lives.
const Prefix = "/api/v1/knowledge/orgs/{org}"

// Request is an authenticated request whose organization the caller may
// see with the route's permission.
type Request struct {
	*door.Call
	Principal *Principal
	Org       string
}

// API serves the routes: the service's door (door.Table).
type API struct {
	Log     *slog.Logger
	Auth    Authenticate
	K       *knowledge.Service
	MaxBody int64
	kit     door.Table[*Request, Perm]
}

// Authenticate resolves an Authorization header (Authenticator does).
type Authenticate interface {
	Authenticate(ctx context.Context, header string) (*Principal, error)
}

// Routes returns the route table.
func (a *API) Routes() []*Route { return a.kit.Routes() }

// Handler returns the mux of every route, the OpenAPI document and the
// probes.
func (a *API) Handler() http.Handler {
	a.kit = door.Table[*Request, Perm]{Log: a.Log, Prefix: Prefix, MaxBody: a.MaxBody, Realm: "ballet-knowledge", Open: a.open}
	a.kit.Add(a.table()...)
	mux := http.NewServeMux()
	a.kit.Register(mux)
	mux.Handle("GET /api/v1/knowledge/openapi.json", door.Document(a.OpenAPI()))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { door.Write(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.K.Store.Query(r.Context(), `SELECT 1 FROM schema_migrations LIMIT 1`); err != nil {
			door.WriteError(w, http.StatusServiceUnavailable, apperr.Unavailable, "the database cannot be read")
			return
		}
		door.Write(w, 200, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("/", door.NoRoute)
	return door.Headers(mux)
}

// open is the service's prologue (door.Table.Open): the caller, resolved
// through Core's introspection, and its role in the path's organization
// checked against the route's permission (authorize), once, for every
// route.
func (a *API) open(_ http.ResponseWriter, c *door.Call, rt *Route) (*Request, error) {
	p, err := a.Auth.Authenticate(c.Context(), c.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	org := c.PathValue("org")
	if err := authorize(p, org, rt.Perm); err != nil {
		return nil, err
	}
	c.Checked()
	return &Request{Call: c, Principal: p, Org: org}, nil
}

// authorize is the one access decision: a caller with no role in the
// organization gets the 404 a missing organization would get; one whose
// role is too low gets 403.
func authorize(p *Principal, org string, perm Perm) error {
	role := p.Role(org)
	if role == "" {
		return apperr.New(apperr.NotFound, "organization %q not found", org)
	}
	if p.Service && perm != Read {
		return apperr.New(apperr.Forbidden, "the service credential only reads")
	}
	if roleRank[role] < roleRank[permRole[perm]] {
		return apperr.New(apperr.Forbidden, "your role %q does not grant %s (it needs %s)", role, perm, permRole[perm])
	}
	return nil
}

// Actor is the caller as the log records it.
func (r *Request) Actor() event.Actor { return r.Principal.Actor() }

// ErrorBody is the API's one error shape, Core's.
type ErrorBody = door.ErrorBody

// pathSlug reads an entry slug from the path: one segment, its slashes
// sent escaped (%2F) — Go's mux matches the escaped path and unescapes the
// value.
func pathSlug(r *Request) string { return strings.TrimSpace(r.PathValue("slug")) }
