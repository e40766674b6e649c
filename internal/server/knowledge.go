package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/credential"
	"github.com/ballet/ballet/internal/door"
)

// Core's side of the Knowledge service (issue 17): the introspection
// endpoint the service resolves callers through, and the proxy that lets
// browsers reach the service through Core.

// PermService is the route table's kind for a route only the Knowledge
// service calls: no user credential, no role; the handler checks the
// service credential ([knowledge] service_token), which no other route
// accepts.
const PermService access.Permission = "service"

// IntrospectPath is Core's introspection endpoint.
const IntrospectPath = "/api/v1/internal/introspect"

// KnowledgePrefix is the path prefix Core proxies to the Knowledge service.
const KnowledgePrefix = "/api/v1/knowledge/"

// Introspect resolves a credential for the Knowledge service: who it is
// and its organizations with its role in each.
type Introspect struct {
	// Token is the service credential ("": nothing may call the route).
	Token string
	// Authn resolves the credential being introspected, as every route
	// does (the service credential itself is refused there).
	Authn  Authenticator
	Orgs   OrgReader
	Access *access.Resolver
}

// IntrospectRequest is the body of POST /internal/introspect.
type IntrospectRequest struct {
	// Credential is a bearer token Core accepts (bootstrap, API token,
	// OIDC identity token).
	Credential string `json:"credential"`
}

// IntrospectAnswer is what the service learns about a credential: only
// {"active": false} for one Core does not accept.
type IntrospectAnswer struct {
	Active        bool            `json:"active"`
	Subject       string          `json:"subject,omitzero"`
	Name          string          `json:"name,omitzero"`
	Kind          string          `json:"kind,omitzero"` // human or service
	PlatformAdmin *bool           `json:"platform_admin,omitzero"`
	Orgs          []IntrospectOrg `json:"orgs,omitzero"`
	// ExpiresAt is when the credential stops being valid (absent: no
	// expiry); a cache must not keep it past that.
	ExpiresAt *time.Time `json:"expires_at,omitzero"`
}

// IntrospectOrg is one organization of the caller with its role there.
type IntrospectOrg struct {
	Slug string `json:"slug"`
	ID   string `json:"id"`
	Role string `json:"role"`
}

// Routes returns the introspection endpoint.
func (h *Introspect) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: IntrospectPath, Perm: PermService,
			Summary: "Resolve a credential for the Knowledge service: its subject and its organizations with a role in each " +
				"({\"active\": false} when Core does not accept it); only with the service credential ([knowledge] service_token), 401 for any other",
			Request: IntrospectRequest{}, Response: IntrospectAnswer{}, Handle: h.introspect},
	}
}

func (h *Introspect) introspect(r *Request) (any, error) {
	r.Checked() // the service credential is the route's whole access rule
	if !h.isService(r.Header.Get("Authorization")) {
		return nil, apperr.New(apperr.Unauthenticated, "%s takes only the Knowledge service credential", IntrospectPath)
	}
	var in IntrospectRequest
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Credential) == "" {
		return nil, apperr.Fields([]apperr.FieldError{{Field: "credential", Message: "must not be empty"}})
	}
	p, err := h.Authn.Authenticate(r.Context(), "Bearer "+in.Credential)
	if apperr.Code(err) == apperr.Unauthenticated {
		return IntrospectAnswer{Active: false}, nil
	}
	if err != nil {
		return nil, err // e.g. the identity provider unavailable: 503, the service may retry
	}
	orgs, err := h.roles(r.Context(), p)
	if err != nil {
		return nil, err
	}
	a := IntrospectAnswer{Active: true, Subject: p.Subject, Name: p.Subject, Kind: p.Kind, PlatformAdmin: &p.PlatformAdmin, Orgs: orgs}
	if !p.ExpiresAt.IsZero() {
		a.ExpiresAt = &p.ExpiresAt
	}
	return a, nil
}

// isService reports, in constant time, whether an Authorization header
// carries the service credential.
func (h *Introspect) isService(header string) bool {
	cred, ok := credential.Bearer(header)
	return ok && h.Token != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(h.Token)) == 1
}

// roles lists p's organizations with its role in each, as Core's own
// checks would resolve it organization-wide: a person's organization role
// (viewer when it holds only project roles there), a token's role capped
// by its creator's and by its scopes. Organizations where that leaves no
// role are left out.
func (h *Introspect) roles(ctx context.Context, p *auth.Principal) ([]IntrospectOrg, error) {
	orgs, err := orgsOf(ctx, h.Orgs, p)
	if err != nil {
		return nil, err
	}
	g, token := p.TokenGrant()
	out := []IntrospectOrg{}
	for _, o := range orgs {
		role, err := h.Access.Role(ctx, p, o.ID, "")
		if err != nil {
			return nil, err
		}
		if role == "" && !token {
			if hi, err := h.Access.HighestRole(ctx, p.Subject, o.ID); err != nil {
				return nil, err
			} else if hi != "" {
				role = access.Viewer
			}
		}
		if token && len(g.Scopes) > 0 {
			role = access.Lower(role, scopeRole(g.Scopes))
		}
		if role != "" {
			out = append(out, IntrospectOrg{Slug: o.Slug, ID: o.ID, Role: role})
		}
	}
	return out, nil
}

// scopeRole is the highest role all of whose permissions a token's scopes
// include ("" when none).
func scopeRole(scopes []string) string {
	best := ""
	for _, role := range []string{access.Viewer, access.Member, access.Admin} {
		all := true
		for _, perm := range access.Scoped {
			if access.Grants(role, perm) && !slices.Contains(scopes, string(perm)) {
				all = false
			}
		}
		if all {
			best = role
		}
	}
	return best
}

// KnowledgeProxy forwards every request under KnowledgePrefix to the
// Knowledge service at Target, and nothing else anywhere else: the path
// and query unchanged, the caller's bearer credential unchanged (a session
// cookie becomes the bearer of its value after the cross-origin check), hop-by-hop headers and cookies stripped
// both ways, the body bounded like Core's own. The service decides access
// (it introspects the credential); the service credential is refused here
// as everywhere. A service that does not answer is a 503 in the API's
// error shape.
type KnowledgeProxy struct {
	Target  *url.URL
	MaxBody int64
	// Reserved reports the credentials no caller may present
	// (auth.Authenticator.IsReserved).
	Reserved func(cred string) bool
	// Session, when set, returns the session value of a request's cookie
	// (false: none), sent as the bearer when the request has no
	// Authorization header of its own.
	Session func(r *http.Request) (string, bool)
	Log     *slog.Logger

	proxy *httputil.ReverseProxy
	csrf  *http.CrossOriginProtection
}

// NewKnowledgeProxy returns the proxy to the service at target.
func NewKnowledgeProxy(target string, maxBody int64, reserved func(string) bool, log *slog.Logger) (*KnowledgeProxy, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("knowledge.url: not an http(s) URL")
	}
	p := &KnowledgeProxy{Target: u, MaxBody: maxBody, Reserved: reserved, Log: log, csrf: http.NewCrossOriginProtection()}
	transport := &http.Transport{
		Proxy:                 nil, // straight to the configured service, never through an environment's proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       time.Minute,
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
			pr.Out.Host = u.Host
			pr.Out.Header.Del("Cookie")
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("Set-Cookie") // the service sets nothing on Core's origin
			door.DropHeaders(resp.Header) // Core's own (door.Headers) stand
			return nil
		},
		ErrorHandler: p.failed,
	}
	return p, nil
}

// UseCSRF makes the proxy check cookie requests with csrf (the API's, which
// trusts [http] public_url's origin too).
func (p *KnowledgeProxy) UseCSRF(csrf *http.CrossOriginProtection) { p.csrf = csrf }

// ServeHTTP forwards a request under KnowledgePrefix.
func (p *KnowledgeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The mux routes only the prefix here, with "." and ".." cleaned away
	// unless escaped (%2e%2e): such a path never leaves Core either.
	if !strings.HasPrefix(r.URL.Path, KnowledgePrefix) || dotSegment(r.URL.Path) {
		WriteError(w, http.StatusNotFound, apperr.NotFound, "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	if cred, ok := credential.Bearer(r.Header.Get("Authorization")); ok && p.Reserved != nil && p.Reserved(cred) {
		WriteError(w, http.StatusUnauthorized, apperr.Unauthenticated, "a service credential is not a user credential")
		return
	}
	out := r.Clone(r.Context())
	if out.Header.Get("Authorization") == "" && p.Session != nil {
		if value, ok := p.Session(r); ok {
			if err := p.csrf.Check(r); err != nil {
				WriteError(w, http.StatusForbidden, apperr.Forbidden, "cross-origin request refused: "+err.Error())
				return
			}
			out.Header.Set("Authorization", "Bearer "+value)
		}
	}
	if r.ContentLength > p.MaxBody {
		WriteError(w, http.StatusRequestEntityTooLarge, apperr.TooLarge, "request body exceeds "+strconv.FormatInt(p.MaxBody, 10)+" bytes")
		return
	}
	if r.Body != nil {
		out.Body = http.MaxBytesReader(w, r.Body, p.MaxBody)
	}
	p.proxy.ServeHTTP(w, out)
}

// dotSegment reports whether the (decoded) path has a "." or ".." segment.
func dotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// failed answers a request the service did not answer.
func (p *KnowledgeProxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		WriteError(w, http.StatusRequestEntityTooLarge, apperr.TooLarge, "request body exceeds "+strconv.FormatInt(p.MaxBody, 10)+" bytes")
	case errors.Is(err, context.Canceled):
		// The caller went away: nobody to answer.
	default:
		p.Log.Warn("knowledge service unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusServiceUnavailable, apperr.Unavailable, "the Knowledge service is unavailable; try again later")
	}
}
