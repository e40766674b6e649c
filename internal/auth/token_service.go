package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Token lifetimes.
const (
	// DefaultAPITokenTTL is an API token's lifetime when expires_in is
	// absent.
	DefaultAPITokenTTL = 90 * 24 * time.Hour
	// MaxTokenTTL bounds expires_in.
	MaxTokenTTL = 365 * 24 * time.Hour
)

// ScopeRunner is the scope a runner token carries by default.
const ScopeRunner = "runner"

// TokenService creates, lists and revokes service tokens on behalf of an
// authenticated principal. The rules:
//
//   - only humans (OIDC users, the bootstrap admin) create tokens: a token
//     cannot mint tokens (403);
//   - kind "api" (the default) acts in exactly one organization with a role
//     not above the highest role its creator holds there, organization-wide
//     or in a project (default: that role); in each scope it touches it
//     acts at most with its creator's current role there (a project
//     override included); role "platform_admin" is for platform admins only
//     and names no organization; an organization is otherwise required
//     (400 without one);
//   - kind "runner" is platform-wide, for platform admins only, and carries
//     no organization or role (scopes default to ["runner"]);
//   - kind "run" is issued by the system for each run, never here (400);
//   - API tokens expire after expires_in (default 90 days, at most a year);
//     runner tokens expire only when expires_in is given;
//   - the secret is returned once, by Create; only its hash is stored.
type TokenService struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Access  *access.Resolver
}

// NewTokenService returns a TokenService.
func NewTokenService(s store.Store, a *transition.Applier, c clock.Clock, res *access.Resolver) *TokenService {
	return &TokenService{Store: s, Applier: a, Clock: c, Access: res}
}

// TokenInput is a token someone asks for.
type TokenInput struct {
	Name         string
	Kind         string // api ("": the default) or runner
	Organization string // slug or id; api tokens
	Role         string // viewer, member, admin or platform_admin
	Scopes       []string
	ExpiresIn    string // Go duration, e.g. "720h"; "": the kind's default
}

// CreatedToken is a new token with its secret, shown only this once.
type CreatedToken struct {
	Secret string `json:"token"`
	Token
}

// TokenFilter selects tokens to list.
type TokenFilter struct {
	Kind  string // "" for every kind
	Limit int    // default 100, at most 1000
}

// scopeNames lists what an API token's scopes may name.
func scopeNames() string {
	names := make([]string, len(access.Scoped))
	for i, p := range access.Scoped {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// tokenRequest is a validated TokenInput.
type tokenRequest struct {
	kind, name, org, role string
	scopes                []string
	ttl                   time.Duration // 0: no expiry
}

func (in TokenInput) validate() (tokenRequest, error) {
	var v apperr.Validator
	r := tokenRequest{kind: in.Kind, name: strings.TrimSpace(in.Name), org: strings.TrimSpace(in.Organization), role: in.Role}
	if r.kind == "" {
		r.kind = KindAPI
	}
	v.Check(r.name != "" && len(r.name) <= 200, "name", "must be 1–200 characters")
	v.CheckErr("name", text.Line(r.name))
	switch r.kind {
	case KindAPI:
		switch {
		case r.role == RolePlatformAdmin:
			v.Check(r.org == "", "organization", "must be absent: a platform_admin token acts on every organization")
		case r.role != "" && !access.ValidRole(r.role):
			v.Add("role", "%q is not viewer, member, admin or platform_admin", r.role)
		}
		v.Check(r.org != "" || r.role == RolePlatformAdmin, "organization",
			"is required: an api token acts in one organization (slug or id), unless its role is platform_admin")
	case KindRunner:
		v.Check(r.org == "", "organization", "must be absent: runner tokens are platform-wide")
		v.Check(r.role == "", "role", "must be absent: runner tokens hold no role")
	case KindRun:
		v.Add("kind", "run tokens are issued by Ballet for each run, not through the API")
	default:
		v.Add("kind", "%q is not api or runner", r.kind)
	}
	v.Check(len(in.Scopes) <= 32, "scopes", "at most 32 scopes")
	seen := map[string]bool{}
	for i, s := range in.Scopes {
		field := fmt.Sprintf("scopes[%d]", i)
		switch {
		case r.kind == KindRunner:
			v.Check(s == ScopeRunner, field, "%q: a runner token's only scope is %q", s, ScopeRunner)
		case s == string(access.PlatformAdmin):
			v.Check(r.role == RolePlatformAdmin, field, "%q is for platform_admin tokens only", s)
		default:
			v.Check(access.ValidScope(s), field, "%q is not a permission a token can be limited to (%s)", s, scopeNames())
		}
		v.Check(!seen[s], field, "%q is listed twice", s)
		seen[s] = true
	}
	r.scopes = append([]string{}, in.Scopes...)
	if r.kind == KindRunner && len(r.scopes) == 0 {
		r.scopes = []string{ScopeRunner}
	}
	if r.kind == KindAPI {
		r.ttl = DefaultAPITokenTTL
	}
	if in.ExpiresIn != "" {
		d, err := time.ParseDuration(in.ExpiresIn)
		switch {
		case err != nil:
			v.Add("expires_in", "%q is not a duration like \"720h\" or \"30m\"", in.ExpiresIn)
		case d <= 0 || d > MaxTokenTTL:
			v.Add("expires_in", "%s must be positive and at most %s (one year)", in.ExpiresIn, MaxTokenTTL)
		default:
			r.ttl = d
		}
	}
	return r, v.Err()
}

// MayCreate refuses service principals: a token cannot create tokens.
func MayCreate(p *Principal) error {
	if p.TokenID != "" {
		return apperr.New(apperr.Forbidden, "a token cannot create tokens: authenticate as a human")
	}
	return nil
}

// Create issues a token for p. The returned secret is never stored or
// shown again.
func (s *TokenService) Create(ctx context.Context, p *Principal, in TokenInput) (CreatedToken, error) {
	if err := MayCreate(p); err != nil {
		return CreatedToken{}, err
	}
	r, err := in.validate()
	if err != nil {
		return CreatedToken{}, err
	}
	var orgID string
	switch {
	case r.kind == KindRunner && !p.PlatformAdmin:
		return CreatedToken{}, apperr.New(apperr.Forbidden, "only a platform admin may create runner tokens")
	case r.role == RolePlatformAdmin && !p.PlatformAdmin:
		return CreatedToken{}, apperr.New(apperr.Forbidden, "only a platform admin may create a platform_admin token")
	case r.kind == KindAPI && r.role != RolePlatformAdmin:
		if orgID, r.role, err = s.orgRole(ctx, p, r.org, r.role); err != nil {
			return CreatedToken{}, err
		}
	}
	now := s.Clock.Now().Truncate(time.Millisecond)
	var exp *time.Time
	if r.ttl > 0 {
		e := now.Add(r.ttl).Truncate(time.Millisecond)
		exp = &e
	}
	secret, tok, t := Issue(p.Actor(), r.kind, r.name, orgID, r.role, r.scopes, exp, now.Truncate(time.Millisecond))
	if err := s.Applier.Apply(ctx, t); err != nil {
		return CreatedToken{}, err
	}
	return CreatedToken{Secret: secret, Token: tok}, nil
}

// orgRole resolves the organization of an API token and the role it gets:
// the requested one if the creator's highest role there (organization-wide
// or in a project) is at least as high; by default that role. An
// organization the creator has no role in is not found. Wherever the token
// acts, its creator's role in that scope caps it (access.Resolver.Role).
func (s *TokenService) orgRole(ctx context.Context, p *Principal, ref, want string) (orgID, role string, err error) {
	org, err := tenancy.ReadOrganization(ctx, s.Store, ref)
	if err != nil {
		return "", "", err
	}
	orgID, slug := org.ID, org.Slug
	notFound := apperr.New(apperr.NotFound, "organization %q not found", ref)
	mine := access.Admin
	if !p.PlatformAdmin {
		if mine, err = s.Access.HighestRole(ctx, p.Subject, orgID); err != nil {
			return "", "", err
		}
	}
	if mine == "" {
		return "", "", notFound
	}
	if want == "" {
		return orgID, mine, nil
	}
	if !access.RoleAtLeast(mine, want) {
		return "", "", apperr.New(apperr.Forbidden, "a token's role cannot be above yours: your highest role in %s is %s, not %s", slug, mine, want)
	}
	return orgID, want, nil
}

const tokenColumns = `id, kind, name, subject, COALESCE(acting_for, ''), COALESCE(organization_id, ''), COALESCE(role, ''), scopes,
COALESCE(expires_at, 0), COALESCE(revoked_at, 0), created_by, created_at, version`

func scanToken(rows *store.Rows, i int) (Token, error) {
	var t Token
	var scopes string
	var exp, rev, created int64
	if err := rows.Scan(i, &t.ID, &t.Kind, &t.Name, &t.Subject, &t.ActingFor, &t.OrganizationID, &t.Role, &scopes,
		&exp, &rev, &t.CreatedBy, &created, &t.Version); err != nil {
		return t, fmt.Errorf("scan token: %w", err)
	}
	if err := json.Unmarshal([]byte(scopes), &t.Scopes); err != nil {
		return t, fmt.Errorf("token %s scopes: %w", t.ID, err)
	}
	t.ExpiresAt, t.RevokedAt = optionalTime(exp), optionalTime(rev)
	t.CreatedAt = time.UnixMilli(created).UTC()
	return t, nil
}

func optionalTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// List returns the tokens p created (every token for platform admins),
// newest first, without secrets or hashes.
func (s *TokenService) List(ctx context.Context, p *Principal, f TokenFilter) ([]Token, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var where []string
	var args []any
	if !p.PlatformAdmin {
		where = append(where, "created_by = ?")
		args = append(args, p.Subject)
	}
	if f.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, f.Kind)
	}
	q := `SELECT ` + tokenColumns + ` FROM tokens`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.Store.Query(ctx, q+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return store.ScanAll(rows, scanToken)
}

// Revoke revokes a token p created (any token for platform admins); other
// tokens are not found. Revoking a revoked token changes nothing.
func (s *TokenService) Revoke(ctx context.Context, p *Principal, id string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		t, found, err := ReadToken(ctx, s.Store, id)
		if err != nil {
			return nil, err
		}
		if !found || !t.visibleTo(p) {
			return nil, apperr.New(apperr.NotFound, "token %q not found", id)
		}
		revoke, ok := Revocation(p.Actor(), t, s.Clock.Now().Truncate(time.Millisecond))
		if !ok {
			return nil, nil
		}
		return &revoke, nil
	})
	return err
}

// visibleTo reports whether p may see (and revoke) the token: its creator
// or a platform admin; for anyone else it does not exist.
func (t Token) visibleTo(p *Principal) bool { return p.PlatformAdmin || t.CreatedBy == p.Subject }

// Find returns the token with the id if p may see it (its creator or a
// platform admin); for anyone else it is not found.
func (s *TokenService) Find(ctx context.Context, p *Principal, id string) (Token, error) {
	t, found, err := ReadToken(ctx, s.Store, id)
	if err != nil {
		return Token{}, err
	}
	if !found || !t.visibleTo(p) {
		return Token{}, apperr.New(apperr.NotFound, "token %q not found", id)
	}
	return t, nil
}

// ReadToken reads a token by id (found=false: there is none).
func ReadToken(ctx context.Context, q Querier, id string) (t Token, found bool, err error) {
	rows, err := q.Query(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = ?`, id)
	if err != nil {
		return Token{}, false, fmt.Errorf("read token: %w", err)
	}
	if rows.Len() == 0 {
		return Token{}, false, nil
	}
	t, err = scanToken(rows, 0)
	return t, err == nil, err
}

// Revocation is the part of a transition that revokes t as read, by actor:
// its token.revoked event and its update, guarded by t's version, and the
// end of the browser sessions it started. A
// revoked token needs nothing (ok=false, an empty part).
func Revocation(actor event.Actor, t Token, now time.Time) (part transition.Transition, ok bool) {
	if t.RevokedAt != nil {
		return transition.Transition{}, false
	}
	e := event.Of(actor, t.OrganizationID, "", t.ID, TokenRevoked{ID: t.ID, Name: t.Name, Kind: t.Kind})
	return transition.Transition{
		Events: []event.Event{e},
		Guarded: []store.Statement{store.Stmt(`UPDATE tokens SET revoked_at = ?, version = version + 1 WHERE id = ? AND version = ?`,
			now.UnixMilli(), t.ID, t.Version)},
		// The browser sessions it started end with it (they could no longer
		// authenticate anyway): token.revoked records both.
		Statements: []store.Statement{store.Stmt(`UPDATE sessions SET ended_at = ?, version = version + 1 WHERE token_id = ? AND ended_at IS NULL`,
			now.UnixMilli(), t.ID)},
	}, true
}
