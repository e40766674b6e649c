// Package auth turns a bearer credential into a Principal. Humans present
// OIDC JWTs (verified with github.com/coreos/go-oidc against the configured
// issuer and audience); services present opaque tokens that Ballet issued
// and stores only as SHA-256 hashes (API, runner and run tokens: scoped,
// revocable, expiring). The embedded default needs no identity provider: a
// bootstrap token is a platform-admin credential.
package auth

import (
	"cmp"
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
	"github.com/ballet/ballet/internal/credential"
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
	// CappedBy is the subject whose current role caps an API token in
	// every scope it touches (its creator); "" when its creator is a
	// platform admin.
	CappedBy string
	Scopes   []string
	// ExpiresAt is when the credential stops being valid (zero: never):
	// an opaque token's expiry or an identity token's exp.
	ExpiresAt time.Time
	// Name is for people: the token's name, "bootstrap", an identity's
	// name or email (else its subject), a session's.
	Name string
	// VerifiedEmail is the address an OIDC sign-in's ID token vouched for
	// (its email claim, with email_verified true); "" otherwise.
	VerifiedEmail string
	// SessionID is set when the credential is a browser session, which
	// acts as the credential that started it (the other fields).
	SessionID string
}

// AccessSubject implements access.Principal.
func (p *Principal) AccessSubject() string { return p.Subject }

// IsPlatformAdmin implements access.Principal.
func (p *Principal) IsPlatformAdmin() bool { return p.PlatformAdmin }

// TokenGrant implements access.Principal: an API token acts only within
// its organization and role, capped by its creator's current role in each
// scope; runner and run tokens hold no role.
func (p *Principal) TokenGrant() (access.Grant, bool) {
	if p.TokenID == "" {
		return access.Grant{}, false
	}
	if p.TokenKind != KindAPI {
		return access.Grant{}, true
	}
	return access.Grant{OrgID: p.OrgID, Role: p.Role, CappedBy: p.CappedBy, Scopes: p.Scopes}, true
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
	// reserved are credentials that are never a caller's (the Knowledge
	// service credential): refused wherever a bearer is.
	reserved []string

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

// Reserve makes secret a credential Authenticate always refuses: a
// service's shared credential (the Knowledge service's) is never a user
// credential, whatever it looks like. Call it before serving; "" is
// ignored.
func (a *Authenticator) Reserve(secret string) {
	if secret != "" {
		a.reserved = append(a.reserved, secret)
	}
}

// IsReserved reports, in constant time per reserved credential, whether
// cred is one of them.
func (a *Authenticator) IsReserved(cred string) bool {
	hit := 0
	for _, r := range a.reserved {
		hit |= subtle.ConstantTimeCompare([]byte(cred), []byte(r))
	}
	return hit == 1
}

func unauthenticated(format string, args ...any) error {
	return apperr.New(apperr.Unauthenticated, format, args...)
}

// IsPlatformAdmin reports whether a person (a subject) is a platform
// admin: the bootstrap token's subject while a bootstrap token is set, or
// one of [auth] platform_admins.
func (a *Authenticator) IsPlatformAdmin(subject string) bool {
	return (subject == BootstrapSubject && a.bootstrap != "") || a.admins[subject]
}

// Authenticate checks an Authorization header value.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (*Principal, error) {
	if header == "" {
		return nil, unauthenticated("missing Authorization: Bearer credential")
	}
	cred, ok := credential.Bearer(header)
	if !ok {
		return nil, unauthenticated("the Authorization header must be \"Bearer <token>\"")
	}
	if a.IsReserved(cred) {
		return nil, unauthenticated("a service credential is not a user credential")
	}
	if a.bootstrap != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(a.bootstrap)) == 1 {
		return &Principal{Kind: event.ActorHuman, Subject: BootstrapSubject, PlatformAdmin: true, Name: BootstrapSubject}, nil
	}
	if strings.HasPrefix(cred, SessionPrefix) {
		return a.session(ctx, cred)
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
	p, err := a.load(ctx, `hash = ?`, Hash(secret))
	if err != nil {
		return nil, err
	}
	return a.tokenPrincipal(ctx, p)
}

// tokenPrincipal finishes a stored token's principal: an API token capped
// by its creator, a runner or run token void once what it acts for is.
func (a *Authenticator) tokenPrincipal(ctx context.Context, p *Principal) (*Principal, error) {
	var err error
	switch p.TokenKind {
	case KindAPI:
		a.capRole(p)
	case KindRunner:
		// A runner token leases every organization's runs: it acts only
		// while its creator is a platform admin, as it had to be to
		// create it.
		if !a.IsPlatformAdmin(p.ActingFor) {
			return nil, unauthenticated("token void: its creator is no longer a platform admin")
		}
	case KindRun:
		// A run token acts for the runner token that leased its run, and
		// dies with it (revoked, expired or void).
		id, ok := strings.CutPrefix(p.ActingFor, "token:")
		var runner *Principal
		if ok {
			runner, err = a.load(ctx, `id = ?`, id)
		}
		switch {
		case err != nil && apperr.Code(err) != apperr.Unauthenticated:
			return nil, err
		case !ok || err != nil || runner.TokenKind != KindRunner || !a.IsPlatformAdmin(runner.ActingFor):
			return nil, unauthenticated("token void: the runner token that leased its run is no longer valid")
		}
		if !runner.ExpiresAt.IsZero() && (p.ExpiresAt.IsZero() || runner.ExpiresAt.Before(p.ExpiresAt)) {
			p.ExpiresAt = runner.ExpiresAt
		}
	}
	return p, nil
}

// load reads one stored token by a condition on its row and returns it as
// a principal; unknown, revoked and expired tokens are unauthenticated.
func (a *Authenticator) load(ctx context.Context, where string, arg any) (*Principal, error) {
	return loadToken(ctx, a.store, a.clock.Now(), where, arg)
}

// Querier reads the store.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
}

func loadToken(ctx context.Context, q Querier, now time.Time, where string, arg any) (*Principal, error) {
	rows, err := q.Query(ctx, `SELECT id, kind, subject, COALESCE(acting_for, ''), COALESCE(organization_id, ''), COALESCE(role, ''), scopes,
COALESCE(expires_at, 0), COALESCE(revoked_at, 0), name FROM tokens WHERE `+where, arg)
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	if rows.Len() == 0 {
		return nil, unauthenticated("unknown token")
	}
	p := &Principal{Kind: event.ActorService}
	var scopes string
	var expires, revoked int64
	if err := rows.Scan(0, &p.TokenID, &p.TokenKind, &p.Subject, &p.ActingFor, &p.OrgID, &p.Role, &scopes, &expires, &revoked, &p.Name); err != nil {
		return nil, err
	}
	if revoked != 0 {
		return nil, unauthenticated("token revoked")
	}
	if expires != 0 {
		p.ExpiresAt = time.UnixMilli(expires).UTC()
		if !now.Before(p.ExpiresAt) {
			return nil, unauthenticated("token expired")
		}
	}
	if err := json.Unmarshal([]byte(scopes), &p.Scopes); err != nil {
		return nil, fmt.Errorf("token %s scopes: %w", p.TokenID, err)
	}
	return p, nil
}

// StillValid re-checks, at now, a token authenticated a while ago (a long
// poll holds its credential for up to a minute): unauthenticated once it
// was revoked or has expired since. Pair it with ValidGuard in the batch
// the caller then writes.
func StillValid(ctx context.Context, q Querier, tokenID string, now time.Time) error {
	_, err := loadToken(ctx, q, now, `id = ?`, tokenID)
	return err
}

// ValidGuard is a guarded statement that matches the token's row only
// while it is neither revoked nor expired at now (it changes nothing): a
// batch acting for a credential read earlier carries it, so a revocation
// committed meanwhile makes the batch lose its race and decide again.
func ValidGuard(tokenID string, now time.Time) store.Statement {
	return store.Stmt(`UPDATE tokens SET version = version WHERE id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
		tokenID, now.UnixMilli())
}

// capRole limits an API token to what its creator may do now: a token
// never outlives its creator's role nor acts above it. A platform_admin
// token is a platform admin only while its creator is one; any other API
// token is capped, in every organization and project it touches, by its
// creator's current role there (access.Resolver.Role), unless the creator
// is a platform admin.
func (a *Authenticator) capRole(p *Principal) {
	creatorAdmin := a.IsPlatformAdmin(p.ActingFor)
	if p.Role == RolePlatformAdmin {
		p.PlatformAdmin = creatorAdmin
		if !creatorAdmin {
			p.Role = ""
		}
		return
	}
	if !creatorAdmin {
		p.CappedBy = p.ActingFor
	}
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
	var claims struct{ Name, Email string }
	_ = tok.Claims(&claims) // verified; a claim of another type is left out
	name := cmp.Or(claims.Name, claims.Email, tok.Subject)
	return &Principal{Kind: event.ActorHuman, Subject: tok.Subject, PlatformAdmin: a.IsPlatformAdmin(tok.Subject), ExpiresAt: tok.Expiry.UTC(), Name: name}, nil
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
