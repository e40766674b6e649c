package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/credential"
	"github.com/ballet/ballet/internal/door"
)

// Session serves browser sessions: sign in with a token (the session cookie
// is set), who am I, sign out. The cookie then authenticates every route
// and the realtime WebSocket as the credential it was started with;
// writes made with it must come from Ballet's own origin (CSRF).
type Session struct {
	S *auth.Sessions
}

// SessionCreate is the body of POST /session.
type SessionCreate struct {
	Token string `json:"token"` // the bootstrap token or an API token
}

// SessionInfo describes the caller: the signed-in session, or the bearer
// credential of the request.
type SessionInfo struct {
	Subject       string     `json:"subject"`
	Name          string     `json:"name"`
	Kind          string     `json:"kind"` // human or service (an API token)
	PlatformAdmin bool       `json:"platform_admin"`
	ExpiresAt     *time.Time `json:"expires_at"` // null: the credential does not expire
}

// Routes returns the session endpoints.
func (h *Session) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/session", Perm: PermSignIn,
			Summary: "Sign in with a bootstrap or API token: starts a browser session (HttpOnly cookie ballet_session), acting as that token",
			Request: SessionCreate{}, Response: SessionInfo{}, Status: http.StatusCreated, Handle: h.create},
		{Method: "GET", Path: "/api/v1/session", Perm: access.Authenticated, Summary: "Who the caller is (its session, or its bearer credential)",
			Response: SessionInfo{}, Handle: h.get},
		{Method: "DELETE", Path: "/api/v1/session", Perm: access.Authenticated,
			Summary: "Sign out: ends the caller's session on the server and clears the cookie (nothing to end for a bearer)",
			Status:  http.StatusNoContent, Handle: h.delete},
	}
}

func info(p *auth.Principal) SessionInfo {
	out := SessionInfo{Subject: p.Subject, Name: p.Name, Kind: p.Kind, PlatformAdmin: p.PlatformAdmin}
	if out.Name == "" {
		out.Name = p.Subject
	}
	if !p.ExpiresAt.IsZero() {
		t := p.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	return out
}

func (h *Session) create(r *Request) (any, error) {
	r.Checked() // the body's credential is the scope
	var in SessionCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(in.Token)
	if tok == "" {
		return nil, apperr.Fields([]apperr.FieldError{{Field: "token", Message: "is required: the bootstrap token or an API token"}})
	}
	p, err := h.S.Auth.Authenticate(r.Context(), "Bearer "+tok)
	if err != nil {
		return nil, err
	}
	secret, sess, err := h.S.Start(r.Context(), p)
	if err != nil {
		return nil, err
	}
	r.SetCookie(SessionCookie(secret, sess.ExpiresAt, r.api.secure))
	p.SessionID, p.ExpiresAt, p.Name = sess.ID, sess.ExpiresAt, sess.Name
	return info(p), nil
}

// SessionValue returns the session value of r's cookie when r has no
// Authorization header of its own (ok=false: none), for a proxy to send
// as the bearer (KnowledgeProxy.Session).
func SessionValue(r *http.Request) (value string, ok bool) {
	header, cookie := door.Credential(r)
	if !cookie {
		return "", false
	}
	return credential.Bearer(header)
}

// SessionCookie is the cookie that carries a new session.
func SessionCookie(secret string, expires time.Time, secure bool) *http.Cookie {
	return &http.Cookie{Name: auth.SessionCookie, Value: secret, Path: "/", Expires: expires, HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteLaxMode}
}

func (h *Session) get(r *Request) (any, error) {
	r.Checked() // the caller itself
	return info(r.Principal), nil
}

func (h *Session) delete(r *Request) (any, error) {
	r.Checked() // the caller's own session
	if err := h.S.End(r.Context(), r.Principal); err != nil {
		return nil, err
	}
	if _, cookie := door.Credential(r.Request); cookie {
		ClearSessionCookie(r.Writer(), r.api.secure)
	}
	return nil, nil
}
