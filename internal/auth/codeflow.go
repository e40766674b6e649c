package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
)

// CodeFlow signs people in through the OIDC issuer in a browser: the
// authorization code flow with PKCE (S256), a state and a nonce
// (golang.org/x/oauth2 for the exchange, go-oidc to verify the ID token).
// Begin returns where to send the browser and what to keep until it comes
// back (the caller keeps it in a short-lived HttpOnly cookie); Finish
// checks what came back against it and returns the person.
type CodeFlow struct {
	Auth         *Authenticator
	ClientID     string
	ClientSecret string // "" for a public client (PKCE alone)
	RedirectURL  string // <[http] public_url>/auth/oidc/callback

	mu       sync.Mutex
	provider *oidc.Provider
}

// Pending is a sign-in on its way through the issuer: never shown to
// anyone but the browser that started it.
type Pending struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Next     string `json:"next"` // a path of Ballet's own to go back to
}

// PendingTTL is how long a sign-in may take at the issuer.
const PendingTTL = 10 * time.Minute

// SafeNext checks a path to return to after signing in: a path of this
// origin only ("/" when empty), never another site (no open redirect).
func SafeNext(next string) (string, error) {
	if next == "" {
		return "/", nil
	}
	u, err := url.Parse(next)
	bad := err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(next, "/") ||
		strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t")
	if bad {
		return "", apperr.Fields([]apperr.FieldError{{Field: "next", Message: fmt.Sprintf("%q is not a path of Ballet's own (like /needs-me)", next)}})
	}
	return next, nil
}

// discover finds the issuer's endpoints on first use (Core starts while
// the identity provider is down).
func (f *CodeFlow) discover(ctx context.Context) (*oidc.Provider, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.provider != nil {
		return f.provider, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, f.Auth.oidc.Issuer)
	if err != nil {
		return nil, apperr.New(apperr.Unavailable, "identity provider %s unavailable: %v", f.Auth.oidc.Issuer, err)
	}
	f.provider = p
	return p, nil
}

func (f *CodeFlow) config(p *oidc.Provider) *oauth2.Config {
	ep := p.Endpoint()
	// One exchange per code: oauth2's auto-detection would retry a refused
	// exchange the other way, and the issuer has spent the code by then.
	ep.AuthStyle = oauth2.AuthStyleInHeader // client_secret_basic, every issuer's default
	if f.ClientSecret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams // a public client sends its id alone
	}
	return &oauth2.Config{ClientID: f.ClientID, ClientSecret: f.ClientSecret, Endpoint: ep, RedirectURL: f.RedirectURL,
		Scopes: []string{oidc.ScopeOpenID, "profile", "email"}}
}

// Begin starts a sign-in that comes back to next: the issuer's
// authorization URL and what to keep until the browser is back.
func (f *CodeFlow) Begin(ctx context.Context, next string) (string, Pending, error) {
	next, err := SafeNext(next)
	if err != nil {
		return "", Pending{}, err
	}
	p, err := f.discover(ctx)
	if err != nil {
		return "", Pending{}, err
	}
	pend := Pending{State: randomValue(), Nonce: randomValue(), Verifier: oauth2.GenerateVerifier(), Next: next}
	u := f.config(p).AuthCodeURL(pend.State, oidc.Nonce(pend.Nonce), oauth2.S256ChallengeOption(pend.Verifier))
	return u, pend, nil
}

// Finish checks the issuer's answer (state and code from the callback's
// query) against the sign-in kept since Begin, exchanges the code with the
// PKCE verifier, verifies the ID token (signature, issuer, audience = the
// client id, expiry, nonce) and returns the person.
func (f *CodeFlow) Finish(ctx context.Context, pend Pending, state, code string) (*Principal, error) {
	if pend.State == "" || subtle.ConstantTimeCompare([]byte(state), []byte(pend.State)) != 1 {
		return nil, unauthenticated("sign-in refused: the state does not match the sign-in this browser started; start again")
	}
	if code == "" {
		return nil, unauthenticated("sign-in refused: the issuer sent no code")
	}
	p, err := f.discover(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := f.config(p).Exchange(ctx, code, oauth2.VerifierOption(pend.Verifier))
	if err != nil {
		return nil, unauthenticated("sign-in refused: the issuer did not exchange the code: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, unauthenticated("sign-in refused: the issuer's answer has no ID token")
	}
	id, err := p.Verifier(&oidc.Config{ClientID: f.ClientID, Now: f.Auth.clock.Now}).Verify(ctx, raw)
	if err != nil {
		return nil, unauthenticated("sign-in refused: invalid ID token: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(pend.Nonce)) != 1 {
		return nil, unauthenticated("sign-in refused: the ID token's nonce does not match this sign-in")
	}
	if id.Subject == "" || id.Subject == BootstrapSubject {
		return nil, unauthenticated("sign-in refused: the ID token's subject %q cannot sign in", id.Subject)
	}
	var claims struct {
		Name, Email   string
		EmailVerified bool `json:"email_verified"`
	}
	_ = id.Claims(&claims)
	name := claims.Name
	if name == "" {
		name = claims.Email
	}
	if name == "" {
		name = id.Subject
	}
	verified := ""
	if claims.EmailVerified {
		verified = claims.Email
	}
	return &Principal{Kind: event.ActorHuman, Subject: id.Subject, PlatformAdmin: f.Auth.IsPlatformAdmin(id.Subject), Name: name,
		VerifiedEmail: verified}, nil
}

// randomValue is 32 random bytes, base64url.
func randomValue() string {
	s, _ := newSessionSecret()
	return strings.TrimPrefix(s, SessionPrefix)
}
