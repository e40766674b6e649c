// Package service is the Knowledge service's HTTP side: its REST routes
// under /api/v1/knowledge/orgs/{org}/… (a route table that drives the mux,
// the OpenAPI document and the authorization-matrix test), strict request
// bodies, Core's one error shape, the callers' credentials resolved through
// Core's introspection (Authenticator) and the process around it (Run).
// It reads no database but its own.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/ballet/ballet/internal/apijson"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/openapi"
	"github.com/ballet/ballet/internal/strictjson"
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

// Route is one REST endpoint.
type Route struct {
	Method  string
	Path    string // below Prefix
	Perm    Perm
	Summary string
	Query   []QueryParam
	Request any // zero value of the body type (nil: none)
	// Response is the success body's type; Status the success status (200
	// when 0).
	Response any
	Status   int
	Handle   func(r *Request) (any, error)
}

// QueryParam documents a query parameter.
type QueryParam = openapi.Param

// Prefix is where every route lives.
const Prefix = "/api/v1/knowledge/orgs/{org}"

// Request is an authenticated request whose organization the caller may
// see with the route's permission.
type Request struct {
	*http.Request
	Principal *Principal
	Org       string
	api       *API
}

// API serves the routes.
type API struct {
	Log     *slog.Logger
	Auth    Authenticate
	K       *knowledge.Service
	MaxBody int64
	routes  []*Route
}

// Authenticate resolves an Authorization header (Authenticator does).
type Authenticate interface {
	Authenticate(ctx context.Context, header string) (*Principal, error)
}

// Routes returns the route table.
func (a *API) Routes() []*Route { return a.routes }

// Handler returns the mux of every route, the OpenAPI document and the
// probes.
func (a *API) Handler() http.Handler {
	a.routes = a.table()
	mux := http.NewServeMux()
	for _, rt := range a.routes {
		mux.Handle(rt.Method+" "+Prefix+rt.Path, a.handler(rt))
	}
	doc, err := json.Marshal(a.OpenAPI())
	if err != nil {
		panic(err) // a programming error: the document is plain data
	}
	mux.HandleFunc("GET /api/v1/knowledge/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.K.Store.Query(r.Context(), `SELECT 1 FROM schema_migrations LIMIT 1`); err != nil {
			writeErr(w, http.StatusServiceUnavailable, apperr.Unavailable, "the database cannot be read")
			return
		}
		writeJSON(w, 200, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, apperr.NotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return apijson.Headers(mux)
}

func (a *API) handler(rt *Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		p, err := a.Auth.Authenticate(hr.Context(), hr.Header.Get("Authorization"))
		if err != nil {
			if apperr.Code(err) == apperr.Unauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ballet-knowledge"`)
			}
			a.writeErr(w, hr, err)
			return
		}
		org := hr.PathValue("org")
		if err := authorize(p, org, rt.Perm); err != nil {
			a.writeErr(w, hr, err)
			return
		}
		if hr.Body != nil {
			hr.Body = http.MaxBytesReader(w, hr.Body, a.MaxBody)
		}
		out, err := rt.Handle(&Request{Request: hr, Principal: p, Org: org, api: a})
		if err != nil {
			a.writeErr(w, hr, err)
			return
		}
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, out)
	})
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

// Decode reads a JSON body strictly into v.
func (r *Request) Decode(v any) error {
	return apijson.DecodeError(strictjson.Read(r.Body, v), r.api.MaxBody)
}

// QueryInt reads an optional integer query parameter within [min, max].
func (r *Request) QueryInt(name string, def, min, max int64) (int64, error) {
	return apijson.QueryInt(r.Request, name, def, min, max)
}

// QueryBool reads an optional boolean query parameter (true or false).
func (r *Request) QueryBool(name string) (bool, error) {
	return apijson.QueryBool(r.Request, name)
}

// Actor is the caller as the log records it.
func (r *Request) Actor() event.Actor { return r.Principal.Actor() }

// ---- the one error shape (Core's) ----

// ErrorBody is the API's one error shape, Core's.
type ErrorBody = apijson.ErrorBody

func (a *API) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code == apperr.Internal {
		if r.Context().Err() != nil {
			return // the client went away
		}
		a.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apperr.New(apperr.Internal, "internal error")
	}
	apijson.WriteApp(w, ae)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	apijson.WriteError(w, status, code, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) { apijson.Write(w, status, v) }

// pathSlug reads an entry slug from the path: one segment, its slashes
// sent escaped (%2F) — Go's mux matches the escaped path and unescapes the
// value.
func pathSlug(r *Request) string { return strings.TrimSpace(r.PathValue("slug")) }
