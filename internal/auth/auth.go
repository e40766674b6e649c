// Package auth turns a bearer credential into a Principal. Humans present
// OIDC JWTs (verified with github.com/coreos/go-oidc against the configured
// issuer and audience); services present opaque tokens that Ballet issued
// and stores only as SHA-256 hashes (API, runner and run tokens: scoped,
// revocable, expiring). The embedded default needs no identity provider: a
// bootstrap token is a platform-admin credential.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
)

// Token kinds.
const (
	KindAPI    = "api"
	KindRunner = "runner"
	KindRun    = "run"
)

// RolePlatformAdmin is the role of an API token that acts as a platform
// admin (only a platform admin can create one).
const RolePlatformAdmin = "platform_admin"

// BootstrapSubject is the subject of the bootstrap platform admin.
const BootstrapSubject = "bootstrap"

// TokenPrefix starts every opaque token Ballet issues.
const TokenPrefix = "ballet_"

// Principal is an authenticated caller.
type Principal struct {
	Kind          string // event.ActorHuman or event.ActorService
	Subject       string // OIDC subject, "bootstrap", or "token:<id>"
	ActingFor     string // the human behind a service token
	PlatformAdmin bool
	// Set for opaque tokens.
	TokenID   string
	TokenKind string
	OrgID     string // API tokens: the one organization they act in
	Role      string // API tokens: their role there
	Scopes    []string
}

// AccessSubject implements access.Principal.
func (p *Principal) AccessSubject() string { return p.Subject }

// IsPlatformAdmin implements access.Principal.
func (p *Principal) IsPlatformAdmin() bool { return p.PlatformAdmin }

// TokenRole implements access.Principal: service tokens act only within
// their organization and role; runner and run tokens hold no role.
func (p *Principal) TokenRole() (string, string, bool) {
	if p.TokenID == "" {
		return "", "", false
	}
	if p.TokenKind != KindAPI {
		return "", "", true
	}
	return p.OrgID, p.Role, true
}

// Actor is the principal as events record it.
func (p *Principal) Actor() event.Actor {
	return event.Actor{Kind: p.Kind, Sub: p.Subject, ActingFor: p.ActingFor}
}

// HasScope reports whether a token carries scope (true for humans).
func (p *Principal) HasScope(scope string) bool {
	if p.TokenID == "" {
		return true
	}
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// NewSecret returns a fresh opaque token and the hash to store.
func NewSecret() (secret, hash string) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, Hash(secret)
}

// Hash returns the stored form of a token.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// OIDCConfig configures human authentication.
type OIDCConfig struct {
	Issuer   string // empty: OIDC disabled
	Audience string
}

// Authenticator resolves bearer credentials.
type Authenticator struct {
	store     store.Store
	clock     clock.Clock
	bootstrap string
	admins    map[string]bool
	oidc      OIDCConfig

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// NewAuthenticator returns an authenticator. bootstrap is the platform-admin
// token ("" disables it); admins lists OIDC subjects that are platform
// admins.
func NewAuthenticator(s store.Store, c clock.Clock, bootstrap string, admins []string, oc OIDCConfig) *Authenticator {
	m := map[string]bool{}
	for _, a := range admins {
		m[a] = true
	}
	return &Authenticator{store: s, clock: c, bootstrap: bootstrap, admins: m, oidc: oc}
}

func unauthenticated(format string, args ...any) error {
	return apperr.New(apperr.Unauthenticated, format, args...)
}

// Authenticate checks an Authorization header value.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (*Principal, error) {
	if header == "" {
		return nil, unauthenticated("missing Authorization: Bearer credential")
	}
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		return nil, unauthenticated("the Authorization header must be \"Bearer <token>\"")
	}
	cred = strings.TrimSpace(cred)
	if a.bootstrap != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(a.bootstrap)) == 1 {
		return &Principal{Kind: event.ActorHuman, Subject: BootstrapSubject, PlatformAdmin: true}, nil
	}
	if strings.HasPrefix(cred, TokenPrefix) {
		return a.token(ctx, cred)
	}
	if strings.Count(cred, ".") == 2 {
		return a.jwt(ctx, cred)
	}
	return nil, unauthenticated("unknown credential")
}

func (a *Authenticator) token(ctx context.Context, secret string) (*Principal, error) {
	rows, err := a.store.Query(ctx, `SELECT id, kind, subject, COALESCE(acting_for, ''), COALESCE(organization_id, ''), COALESCE(role, ''), scopes,
COALESCE(expires_at, 0), COALESCE(revoked_at, 0) FROM tokens WHERE hash = ?`, Hash(secret))
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	if rows.Len() == 0 {
		return nil, unauthenticated("unknown token")
	}
	var p Principal
	var scopes string
	var expires, revoked int64
	if err := rows.Scan(0, &p.TokenID, &p.TokenKind, &p.Subject, &p.ActingFor, &p.OrgID, &p.Role, &scopes, &expires, &revoked); err != nil {
		return nil, err
	}
	if revoked != 0 {
		return nil, unauthenticated("token revoked")
	}
	if expires != 0 && !a.clock.Now().Before(time.UnixMilli(expires)) {
		return nil, unauthenticated("token expired")
	}
	if err := json.Unmarshal([]byte(scopes), &p.Scopes); err != nil {
		return nil, fmt.Errorf("token %s scopes: %w", p.TokenID, err)
	}
	p.Kind = event.ActorService
	if p.TokenKind == KindAPI {
		if err := a.capRole(ctx, &p); err != nil {
			return nil, err
		}
	}
	return &p, nil
}

// capRole limits an API token to what its creator may do now: a token
// never outlives its creator's role (a creator who lost or lowered their
// role takes the token down with them).
func (a *Authenticator) capRole(ctx context.Context, p *Principal) error {
	creatorAdmin := p.ActingFor == BootstrapSubject || a.admins[p.ActingFor]
	if p.Role == RolePlatformAdmin {
		p.PlatformAdmin = creatorAdmin
		if !creatorAdmin {
			p.Role = ""
		}
		return nil
	}
	if creatorAdmin {
		return nil
	}
	rows, err := a.store.Query(ctx, `SELECT role FROM memberships WHERE organization_id = ? AND project_id = '' AND subject = ?`, p.OrgID, p.ActingFor)
	if err != nil {
		return fmt.Errorf("read token creator's role: %w", err)
	}
	current := ""
	if rows.Len() > 0 {
		if err := rows.Scan(0, &current); err != nil {
			return err
		}
	}
	switch {
	case current == "":
		p.Role = ""
	case !access.RoleAtLeast(current, p.Role):
		p.Role = current
	}
	return nil
}

func (a *Authenticator) jwt(ctx context.Context, raw string) (*Principal, error) {
	v, err := a.oidcVerifier(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, unauthenticated("invalid identity token: %v", err)
	}
	if tok.Subject == "" {
		return nil, unauthenticated("identity token has no subject")
	}
	if tok.Subject == BootstrapSubject {
		return nil, unauthenticated("the subject %q is reserved for the bootstrap token", BootstrapSubject)
	}
	return &Principal{Kind: event.ActorHuman, Subject: tok.Subject, PlatformAdmin: a.admins[tok.Subject]}, nil
}

// oidcVerifier discovers the issuer on first use, so that Core starts even
// while the identity provider is down.
func (a *Authenticator) oidcVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	if a.oidc.Issuer == "" {
		return nil, unauthenticated("identity tokens are not accepted: no OIDC issuer is configured")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, a.oidc.Issuer)
	if err != nil {
		return nil, apperr.New(apperr.Unavailable, "identity provider %s unavailable: %v", a.oidc.Issuer, err)
	}
	// Keys are fetched with a context that outlives this request.
	keys := oidc.NewRemoteKeySet(context.Background(), jwksURL(p))
	a.verifier = oidc.NewVerifier(a.oidc.Issuer, keys, &oidc.Config{ClientID: a.oidc.Audience, Now: a.clock.Now})
	return a.verifier, nil
}

func jwksURL(p *oidc.Provider) string {
	var claims struct {
		JWKS string `json:"jwks_uri"`
	}
	_ = p.Claims(&claims)
	return claims.JWKS
}

// ErrNoBootstrap reports that no bootstrap token could be set up.
var ErrNoBootstrap = errors.New("no bootstrap token")
