package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/door"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
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

// Route is one REST endpoint (door.Route): the route table drives the mux,
// the OpenAPI document and the authorization tests, so the three cannot
// drift apart.
type Route = door.Route[*Request, access.Permission]

// Request is a request after authentication: door.Call and the
// principal, with Core's scopes (Check, Org, Project, Item, Visible).
type Request struct {
	*door.Call
	Principal *auth.Principal
	api       *API
	route     *Route
}

// API serves the REST endpoints under /api/v1: Core's door (door.Table)
// with its credentials (the bearer, else the session cookie, guarded
// against cross-origin writes) and its access decisions.
type API struct {
	door.Table[*Request, access.Permission]
	authn  Authenticator
	access *access.Resolver
	find   Finders
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
	a := &API{authn: authn, access: res, find: find, csrf: http.NewCrossOriginProtection()}
	a.Table = door.Table[*Request, access.Permission]{Log: log, MaxBody: maxBody, WriteTimeout: writeTimeout, Realm: "ballet", Open: a.open}
	return a
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

// open is Core's prologue (door.Table.Open): the request's credential (the
// header, else the session cookie, whose writes must come from Ballet's
// own origin) authenticated, and a platform admin route's one check.
func (a *API) open(w http.ResponseWriter, c *door.Call, rt *Route) (*Request, error) {
	var p *auth.Principal
	var err error
	header, cookie := door.Credential(c.Request)
	if cookie || rt.Perm == PermSignIn { // the browser sent it, perhaps for another site's page
		err = CrossOrigin(a.csrf, c.Request)
	}
	// A webhook's credential is its signature, the introspection
	// endpoint's the service credential: their handlers check them; a
	// sign-in's is in its body.
	if err == nil && rt.Perm != PermWebhook && rt.Perm != PermService && rt.Perm != PermSignIn {
		p, err = a.authn.Authenticate(c.Context(), header)
	}
	if err != nil {
		if cookie && apperr.Code(err) == apperr.Unauthenticated {
			ClearSessionCookie(w, a.secure)
		}
		return nil, err
	}
	if rt.Perm == access.PlatformAdmin { // no scope to resolve: checked here, once
		if err := a.access.Check(c.Context(), p, access.PlatformAdmin, "", ""); err != nil {
			return nil, err
		}
		c.Checked()
	}
	return &Request{Call: c, Principal: p, api: a, route: rt}, nil
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
	r.Checked()
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
		r.Checked() // nothing found, so nothing to check: the answer is the lookup's error
		return err
	}
	err = r.Authorize(perm, orgID, projectID)
	if apperr.Code(err) == apperr.NotFound {
		return apperr.New(apperr.NotFound, "%s %q not found", what, ref)
	}
	return err
}
