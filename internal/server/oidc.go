package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
)

// OIDCLogin serves the browser's sign-in through the OIDC issuer
// (auth.CodeFlow): GET /auth/oidc/login?next=/path sends the browser to
// the issuer; GET /auth/oidc/callback comes back from it, starts a session
// (the session cookie) and sends the browser on to next. What the sign-in
// must remember meanwhile (state, nonce, PKCE verifier, next) waits in a
// short-lived HttpOnly cookie of these two paths only, so that any Core
// instance can finish it.
type OIDCLogin struct {
	Flow     *auth.CodeFlow
	Sessions *auth.Sessions
	API      *API // its error shape and its cookie's Secure flag
	// VerifiedEmail, when set, keeps the address the issuer vouched for
	// (an email claim with email_verified true) as the person's (their
	// notification address); its failure is logged, not the sign-in's.
	VerifiedEmail func(ctx context.Context, subject, email string) error
}

// PendingCookie carries a sign-in on its way through the issuer.
const PendingCookie = "ballet_oidc"

const oidcPath = "/auth/oidc"

// Register installs the two routes on mux.
func (h *OIDCLogin) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+oidcPath+"/login", h.login)
	mux.HandleFunc("GET "+oidcPath+"/callback", h.callback)
}

func (h *OIDCLogin) login(w http.ResponseWriter, r *http.Request) {
	to, pend, err := h.Flow.Begin(r.Context(), r.URL.Query().Get("next"))
	if err != nil {
		h.API.WriteErr(w, r, err)
		return
	}
	b, err := json.Marshal(pend)
	if err != nil {
		h.API.WriteErr(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: PendingCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: oidcPath,
		MaxAge: int(auth.PendingTTL.Seconds()), HttpOnly: true, Secure: h.API.secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

func (h *OIDCLogin) callback(w http.ResponseWriter, r *http.Request) {
	var pend auth.Pending
	c, err := r.Cookie(PendingCookie)
	if err == nil {
		var b []byte
		if b, err = base64.RawURLEncoding.DecodeString(c.Value); err == nil {
			err = json.Unmarshal(b, &pend)
		}
	}
	if err != nil {
		h.API.WriteErr(w, r, apperr.New(apperr.Invalid,
			"no sign-in in progress in this browser (or it took longer than %s): start again at %s/login", auth.PendingTTL, oidcPath))
		return
	}
	// One use only, whatever happens next.
	http.SetCookie(w, &http.Cookie{Name: PendingCookie, Value: "", Path: oidcPath, MaxAge: -1, HttpOnly: true, Secure: h.API.secure,
		SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.API.WriteErr(w, r, apperr.New(apperr.Unauthenticated, "the identity provider refused the sign-in: %s %s", e, q.Get("error_description")))
		return
	}
	p, err := h.Flow.Finish(r.Context(), pend, q.Get("state"), q.Get("code"))
	if err != nil {
		h.API.WriteErr(w, r, err)
		return
	}
	if h.VerifiedEmail != nil && p.VerifiedEmail != "" {
		if err := h.VerifiedEmail(r.Context(), p.Subject, p.VerifiedEmail); err != nil {
			h.API.Log.Warn("keep the verified address of a sign-in", "subject", p.Subject, "err", err)
		}
	}
	secret, sess, err := h.Sessions.Start(r.Context(), p)
	if err != nil {
		h.API.WriteErr(w, r, err)
		return
	}
	http.SetCookie(w, SessionCookie(secret, sess.ExpiresAt, h.API.secure))
	w.Header().Set("Cache-Control", "no-store")
	next, err := auth.SafeNext(pend.Next) // checked at login; checked again, as it came back from the browser
	if err != nil {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusFound)
}
