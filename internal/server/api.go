package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apijson"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Authenticator resolves a bearer credential.
type Authenticator interface {
	Authenticate(ctx context.Context, header string) (*auth.Principal, error)
}

// Finders look up what a route's path names: {org}, {project}, {item}
// (Request.Org, Project, Item).
type Finders struct {
	Orgs  OrgFinder
	Items ItemFinder
}

// OrgFinder finds organizations (by slug or id) and projects (by key or
// id).
type OrgFinder interface {
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
	FindProject(ctx context.Context, ref string) (tenancy.Project, error)
}

// ItemFinder finds items by key or id.
type ItemFinder interface {
	FindItem(ctx context.Context, ref string) (tracker.Item, error)
}

// Route is one REST endpoint. The route table drives the mux, the OpenAPI
// document and the authorization tests, so the three cannot drift apart.
type Route struct {
	Method  string
	Path    string // net/http pattern path, e.g. /api/v1/items/{item}
	Perm    access.Permission
	Summary string
	// Request and Response are zero values of the body types, for the
	// OpenAPI document (nil: no body).
	Request  any
	Response any
	Status   int // success status (200 when 0)
	// Hold is the longest the handler may keep the request waiting (a long
	// poll). The server's read and write timeouts would cut it short, so
	// for such a route the body is read first, under the read timeout, and
	// then the connection's deadlines move to Hold plus the write timeout
	// from then.
	Hold time.Duration
	// Also lists the other statuses the handler answers beyond those every
	// route may give (see statuses): a success's alternative (HTTPStatus;
	// 204 has no body) or a route's own error, e.g. 422.
	Also []int
	// OptionalBody: the request body may be left out.
	OptionalBody bool
	// RawBody, when set, is the media type of a request body of raw bytes
	// (not JSON; Request is then unused): the handler reads it with
	// Request.Raw.
	RawBody string
	// MaxBody is the route's own request body limit, instead of the
	// server's ([http] max_body_bytes): a protocol's fixed limit.
	MaxBody int64
	// Heavy marks a route whose work grows with its body (parsing a
	// pipeline of up to max_body_bytes takes a core and ~200 bytes of
	// memory per byte for a moment): at most one such request per core
	// runs at a time; the others wait their turn, so a burst of them
	// cannot exhaust memory or starve the other routes.
	Heavy  bool
	Handle func(r *Request) (any, error)
	// Serve, set instead of Handle, is for a route that speaks a protocol
	// of its own (MCP): after authentication it checks access like Handle
	// and returns the handler that answers the request; an error is
	// answered in the API's one shape, and so are the plain-text errors
	// (http.Error) that handler writes.
	Serve func(r *Request) (http.Handler, error)
}

// Request is a request after authentication.
type Request struct {
	*http.Request
	Principal *auth.Principal
	api       *API
	route     *Route
	checked   bool
	w         http.ResponseWriter
}

// SetCookie adds a Set-Cookie header to the answer.
func (r *Request) SetCookie(c *http.Cookie) { http.SetCookie(r.w, c) }

// API serves the REST endpoints under /api/v1.
type API struct {
	log          *slog.Logger
	authn        Authenticator
	access       *access.Resolver
	find         Finders
	maxBody      int64
	writeTimeout time.Duration
	routes       []*Route
	heavy        chan struct{} // a slot per core for Heavy routes
	// csrf refuses cross-origin writes made with the session cookie (and
	// cross-origin sign-ins): a browser sends the cookie with any request.
	csrf *http.CrossOriginProtection
	// secure marks the session cookie Secure ([http] public_url is https).
	secure bool
}

// NewAPI returns an API; add routes with Add, then Register it on a mux.
// find looks up what paths name; maxBody bounds request bodies;
// writeTimeout is the server's (a route that holds requests gets it on top
// of its Hold).
func NewAPI(log *slog.Logger, authn Authenticator, res *access.Resolver, find Finders, maxBody int64, writeTimeout time.Duration) *API {
	return &API{log: log, authn: authn, access: res, find: find, maxBody: maxBody, writeTimeout: writeTimeout,
		heavy: make(chan struct{}, runtime.GOMAXPROCS(0)), csrf: http.NewCrossOriginProtection()}
}

// SetPublicURL tells the API Core's public URL ([http] public_url):
// cookie-authenticated writes may come from its origin too (a proxy in
// front of Core may change the Host the browser used), and the session
// cookie is Secure when it is https.
func (a *API) SetPublicURL(publicURL string) error {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("public URL %q is not an absolute URL", publicURL)
	}
	if err := a.csrf.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
		return fmt.Errorf("trust origin of %q: %w", publicURL, err)
	}
	a.secure = u.Scheme == "https"
	return nil
}

// SecureCookies reports whether the session cookie is Secure.
func (a *API) SecureCookies() bool { return a.secure }

// CSRF is the API's cross-origin protection (the realtime WebSocket and
// the OIDC routes check with it too).
func (a *API) CSRF() *http.CrossOriginProtection { return a.csrf }

// PermSignIn is the route table's kind for the sign-in: its credential is
// in its body, not in a header or cookie.
const PermSignIn access.Permission = "signin"

// CrossOrigin checks a request against csrf: nil, or the API's 403.
func CrossOrigin(csrf *http.CrossOriginProtection, hr *http.Request) error {
	if err := csrf.Check(hr); err != nil {
		return apperr.New(apperr.Forbidden, "cross-origin request refused: a write with the session cookie must come from Ballet's own pages (%v)", err)
	}
	return nil
}

// ClearSessionCookie tells the browser to forget its session cookie.
func ClearSessionCookie(w http.ResponseWriter, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: auth.SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteLaxMode})
}

// Add adds routes.
func (a *API) Add(routes ...*Route) { a.routes = append(a.routes, routes...) }

// Routes returns the route table.
func (a *API) Routes() []*Route { return a.routes }

// Register installs every route on mux.
func (a *API) Register(mux *http.ServeMux) {
	for _, rt := range a.routes {
		mux.Handle(rt.Method+" "+rt.Path, a.handler(rt))
		if rt.Serve != nil { // a protocol's endpoint: other methods are 405 (MCP: no event stream)
			mux.Handle(rt.Path, notAllowed(rt.Method))
		}
	}
}

func (a *API) handler(rt *Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		var p *auth.Principal
		var err error
		header, cookie := apijson.Credential(hr)
		if cookie || rt.Perm == PermSignIn { // the browser sent it, perhaps for another site's page
			err = CrossOrigin(a.csrf, hr)
		}
		// A webhook's credential is its signature, the introspection
		// endpoint's the service credential: their handlers check them; a
		// sign-in's is in its body.
		if err == nil && rt.Perm != PermWebhook && rt.Perm != PermService && rt.Perm != PermSignIn {
			p, err = a.authn.Authenticate(hr.Context(), header)
		}
		if err != nil {
			if apperr.Code(err) == apperr.Unauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ballet"`)
				if cookie {
					ClearSessionCookie(w, a.secure)
				}
			}
			a.writeErr(w, hr, err)
			return
		}
		if rt.Perm == access.PlatformAdmin { // no scope to resolve: checked here, once
			if err := a.access.Check(hr.Context(), p, access.PlatformAdmin, "", ""); err != nil {
				a.writeErr(w, hr, err)
				return
			}
		}
		r := &Request{Request: hr, Principal: p, api: a, route: rt, w: w}
		if hr.Body != nil {
			hr.Body = http.MaxBytesReader(w, hr.Body, a.bodyLimit(rt))
		}
		if rt.Hold > 0 {
			if err := a.hold(w, hr, rt.Hold); err != nil {
				a.writeErr(w, hr, err)
				return
			}
		}
		if rt.Heavy {
			select {
			case a.heavy <- struct{}{}:
				defer func() { <-a.heavy }()
			case <-hr.Context().Done():
				return // the client gave up while waiting its turn
			}
		}
		if rt.Serve != nil {
			a.serve(w, r)
			return
		}
		out, err := rt.Handle(r)
		if err == nil && !r.checked && rt.Perm != access.PlatformAdmin {
			err = fmt.Errorf("route %s %s returned without an access check", rt.Method, rt.Path)
		}
		if err != nil {
			a.writeErr(w, hr, err)
			return
		}
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		if s, ok := out.(interface{ HTTPStatus() int }); ok {
			status = s.HTTPStatus() // e.g. 200 instead of 201 for an idempotent repeat
		}
		if out == nil {
			w.WriteHeader(status)
			return
		}
		WriteJSON(w, status, out)
	})
}

// notAllowed answers 405 naming the method a path takes.
func notAllowed(method string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", method)
		WriteError(w, http.StatusMethodNotAllowed, apperr.NotAllowed, fmt.Sprintf("%s takes only %s, not %s", r.URL.Path, method, r.Method))
	})
}

// bodyLimit is the most a request body of rt may hold.
func (a *API) bodyLimit(rt *Route) int64 {
	if rt.MaxBody > 0 {
		return rt.MaxBody
	}
	return a.maxBody
}

// serve answers a request of a route with Serve.
func (a *API) serve(w http.ResponseWriter, r *Request) {
	h, err := r.route.Serve(r)
	if err == nil && !r.checked {
		err = fmt.Errorf("route %s %s returned without an access check", r.route.Method, r.route.Path)
	}
	if err != nil {
		a.writeErr(w, r.Request, err)
		return
	}
	pw := &plainErrors{ResponseWriter: w}
	h.ServeHTTP(pw, r.Request)
	pw.finish()
}

// plainErrors gives the plain-text errors of a handler Ballet does not
// own (http.Error in a library) the API's one error shape.
type plainErrors struct {
	http.ResponseWriter
	status int // an error held back
	msg    bytes.Buffer
}

func (p *plainErrors) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.status = status
		return
	}
	p.ResponseWriter.WriteHeader(status)
}

func (p *plainErrors) Write(b []byte) (int, error) {
	if p.status != 0 {
		return p.msg.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (p *plainErrors) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// finish writes the error held back, if any.
func (p *plainErrors) finish() {
	if p.status == 0 {
		return
	}
	code, ok := apijson.CodeOf(p.status)
	if !ok {
		code = apperr.Invalid
	}
	WriteError(p.ResponseWriter, p.status, code, strings.TrimSpace(p.msg.String()))
}

// hold reads the body of a request that may wait up to d (under the
// server's read timeout, so a slow body is still cut off), then moves the
// connection's read and write deadlines to d plus the write timeout from
// now (http.ResponseController), past the server's own.
func (a *API) hold(w http.ResponseWriter, hr *http.Request, d time.Duration) error {
	if hr.Body != nil {
		b, err := io.ReadAll(hr.Body)
		if err != nil {
			return apijson.DecodeError(err, a.maxBody)
		}
		hr.Body = io.NopCloser(bytes.NewReader(b))
	}
	until := time.Now().Add(d + a.writeTimeout)
	rc := http.NewResponseController(w)
	err := errors.Join(rc.SetReadDeadline(until), rc.SetWriteDeadline(until))
	if err != nil && !errors.Is(err, http.ErrNotSupported) { // a test recorder has no deadlines
		return fmt.Errorf("hold the request open: %w", err)
	}
	return nil
}

// Check verifies that the caller holds the route's permission in the
// organization (and project, if set). Every handler calls it (or Authorize
// for a different permission) once it knows the scope; the framework
// refuses to answer a route that did not.
func (r *Request) Check(orgID, projectID string) error {
	return r.Authorize(r.route.Perm, orgID, projectID)
}

// Authorize checks a specific permission.
func (r *Request) Authorize(perm access.Permission, orgID, projectID string) error {
	r.checked = true
	return r.api.access.Check(r.Context(), r.Principal, perm, orgID, projectID)
}

// Org resolves the path's {org} (slug or id) and checks the route's
// permission in it.
func (r *Request) Org() (tenancy.Organization, error) {
	ref := r.PathValue("org")
	o, err := r.api.find.Orgs.FindOrganization(r.Context(), ref)
	return o, r.Visible("organization", ref, err, o.ID, "")
}

// Project resolves the path's {project} (key or id) and checks the
// route's permission in it.
func (r *Request) Project() (tenancy.Project, error) {
	ref := r.PathValue("project")
	p, err := r.api.find.Orgs.FindProject(r.Context(), ref)
	return p, r.Visible("project", ref, err, p.OrganizationID, p.ID)
}

// Item resolves the path's {item} (key or id) and checks the route's
// permission in its project.
func (r *Request) Item() (tracker.Item, error) {
	ref := r.PathValue("item")
	it, err := r.api.find.Items.FindItem(r.Context(), ref)
	return it, r.Visible("item", ref, err, it.OrganizationID, it.ProjectID)
}

// Visible finishes resolving an entity (what) the path names as ref, which
// the handler looked up (err is the lookup's error): it checks the route's
// permission in the entity's organization and project. A caller with no
// role there gets the same 404 as for an entity that does not exist, so
// the two cannot be told apart.
func (r *Request) Visible(what, ref string, err error, orgID, projectID string) error {
	return r.visibleAs(r.route.Perm, what, ref, err, orgID, projectID)
}

// visibleAs is Visible for another permission than the route's.
func (r *Request) visibleAs(perm access.Permission, what, ref string, err error, orgID, projectID string) error {
	if err != nil {
		r.checked = true // nothing found, so nothing to check: the answer is the lookup's error
		return err
	}
	err = r.Authorize(perm, orgID, projectID)
	if apperr.Code(err) == apperr.NotFound {
		return apperr.New(apperr.NotFound, "%s %q not found", what, ref)
	}
	return err
}

// Checked marks a route whose scope is the caller itself (for example its
// own tokens), after the handler has filtered by the caller.
func (r *Request) Checked() { r.checked = true }

// Decode reads a JSON body strictly into v (package strictjson): unknown,
// duplicate or differently-cased fields, wrong types, invalid UTF-8,
// trailing data and oversized bodies are errors naming the problem and its
// field.
func (r *Request) Decode(v any) error {
	// The body must be JSON whatever Content-Type says (curl -d sends a
	// form type by default); anything else fails as malformed JSON.
	return apijson.DecodeError(strictjson.Read(r.Body, v), r.api.maxBody)
}

// Raw reads the raw body of a route with RawBody: another Content-Type
// is a 415, a body over the route's limit a 413.
func (r *Request) Raw() ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != r.route.RawBody {
		return nil, apperr.New(apperr.Unsupported, "the body must be sent as Content-Type: %s, not %q", r.route.RawBody, ct)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apijson.DecodeError(err, r.api.bodyLimit(r.route))
	}
	return b, nil
}

// QueryInt reads an optional integer query parameter within [min, max].
func (r *Request) QueryInt(name string, def, min, max int64) (int64, error) {
	return apijson.QueryInt(r.Request, name, def, min, max)
}

// writeErr maps an error to its status; only internal errors are logged.
func (a *API) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apperr.Error
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, transition.ErrGaveUp) || errors.Is(err, store.ErrLostRace):
		ae = apperr.New(apperr.Conflict, "the resource changed concurrently; read it again and retry")
	case errors.Is(err, context.Canceled):
		return
	default:
		a.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apperr.New(apperr.Internal, "internal error")
	}
	apijson.WriteApp(w, ae)
}
