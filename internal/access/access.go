// Package access decides who may do what: roles per organization
// (optionally overridden per project), the permissions they grant, and the
// one Check every endpoint calls. An organization a principal has no role
// in is invisible to it: checks there fail as not found, not forbidden.
package access

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
)

// Permission names an action class.
type Permission string

// Permissions. The first four are the spec's; MemberManage and
// PlatformAdmin complete the set.
const (
	TrackerRead   Permission = "tracker.read"
	TrackerWrite  Permission = "tracker.write"
	ProjectUpdate Permission = "project.update"
	RunManage     Permission = "run.manage"
	MemberManage  Permission = "member.manage"
	PlatformAdmin Permission = "platform.admin"
	// Authenticated needs only a valid credential.
	Authenticated Permission = "authenticated"
)

// Roles.
const (
	Viewer = "viewer"
	Member = "member"
	Admin  = "admin"
)

var grants = map[string][]Permission{
	Viewer: {TrackerRead},
	Member: {TrackerRead, TrackerWrite, RunManage},
	Admin:  {TrackerRead, TrackerWrite, RunManage, ProjectUpdate, MemberManage},
}

// ValidRole reports whether r is a role name.
func ValidRole(r string) bool { _, ok := grants[r]; return ok }

// Grants reports whether role grants p.
func Grants(role string, p Permission) bool {
	for _, g := range grants[role] {
		if g == p {
			return true
		}
	}
	return false
}

// RoleAtLeast reports whether role a grants everything role b does.
func RoleAtLeast(a, b string) bool {
	for _, p := range grants[b] {
		if !Grants(a, p) {
			return false
		}
	}
	return ValidRole(a)
}

// Lower returns the lesser of two roles: what a principal may do when both
// apply. "" (no role) when either is "".
func Lower(a, b string) string {
	switch {
	case !ValidRole(a) || !ValidRole(b):
		return ""
	case RoleAtLeast(a, b):
		return b
	}
	return a
}

// Principal is what access needs to know about a caller.
type Principal interface {
	// Subject is the identity memberships are recorded for.
	AccessSubject() string
	// IsPlatformAdmin: may do everything.
	IsPlatformAdmin() bool
	// TokenGrant, for a token: what it may do (ok=false for humans).
	TokenGrant() (g Grant, ok bool)
}

// Grant is what a token may do: act in one organization with a role, and
// never above its creator's current role in the scope it touches — the
// organization, or a project, where a project override replaces the
// creator's organization role. A zero Grant holds no role anywhere (runner
// and run tokens).
type Grant struct {
	OrgID string
	Role  string
	// CappedBy is the subject whose current role caps the token (its
	// creator); "" when nothing does (a platform admin created it).
	CappedBy string
	// Scopes, when set, are the only permissions the token may use, even
	// where its role grants more.
	Scopes []string
}

// Scoped lists the permissions a token's scopes may name.
var Scoped = []Permission{TrackerRead, TrackerWrite, RunManage, ProjectUpdate, MemberManage, PlatformAdmin}

// ValidScope reports whether s names a permission a token may be limited to.
func ValidScope(s string) bool { return slices.Contains(Scoped, Permission(s)) }

// Resolver reads memberships.
type Resolver struct {
	Store interface {
		Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
	}
}

// Role returns p's role in the organization, overridden by its role in the
// project when projectID is set and an override exists. "" means none. A
// token's role is its own, lowered to its creator's role in that same
// scope: a token never acts above the person behind it, in any project.
func (r *Resolver) Role(ctx context.Context, p Principal, orgID, projectID string) (string, error) {
	if p.IsPlatformAdmin() {
		return Admin, nil
	}
	g, ok := p.TokenGrant()
	if !ok {
		return r.memberRole(ctx, p.AccessSubject(), orgID, projectID)
	}
	if g.OrgID == "" || g.OrgID != orgID || g.Role == "" {
		return "", nil
	}
	if g.CappedBy == "" {
		return g.Role, nil
	}
	creator, err := r.memberRole(ctx, g.CappedBy, orgID, projectID)
	if err != nil {
		return "", fmt.Errorf("read token creator's role: %w", err)
	}
	return Lower(g.Role, creator), nil
}

// SubjectRole returns a person's current role in the organization,
// overridden by their role in the project when projectID is set and an
// override exists ("" means none): what a ticket's assignee must hold, and
// what a notification's recipient is re-checked against.
func (r *Resolver) SubjectRole(ctx context.Context, subject, orgID, projectID string) (string, error) {
	return r.memberRole(ctx, subject, orgID, projectID)
}

// memberRole is subject's recorded role: its project override when
// projectID is set and one exists, else its organization role.
func (r *Resolver) memberRole(ctx context.Context, subject, orgID, projectID string) (string, error) {
	rows, err := r.Store.Query(ctx, `SELECT project_id, role FROM memberships WHERE organization_id = ? AND subject = ? AND project_id IN ('', ?)`,
		orgID, subject, projectID)
	if err != nil {
		return "", fmt.Errorf("read memberships: %w", err)
	}
	role := ""
	for i := range rows.Len() {
		var pid, rl string
		if err := rows.Scan(i, &pid, &rl); err != nil {
			return "", err
		}
		if pid != "" || role == "" {
			role = rl // a project override wins
		}
	}
	return role, nil
}

// HighestRole returns the highest role a person holds anywhere in the
// organization: organization-wide or in any project ("" when none).
func (r *Resolver) HighestRole(ctx context.Context, subject, orgID string) (string, error) {
	rows, err := r.Store.Query(ctx, `SELECT role FROM memberships WHERE organization_id = ? AND subject = ?`, orgID, subject)
	if err != nil {
		return "", fmt.Errorf("read memberships: %w", err)
	}
	best := ""
	for i := range rows.Len() {
		var rl string
		if err := rows.Scan(i, &rl); err != nil {
			return "", err
		}
		if best == "" || !RoleAtLeast(best, rl) {
			best = rl
		}
	}
	return best, nil
}

// Check returns nil when p holds perm in the scope; an apperr NotFound when
// p has no role there at all (the scope stays invisible); Forbidden when it
// has a role that does not grant perm.
func (r *Resolver) Check(ctx context.Context, p Principal, perm Permission, orgID, projectID string) error {
	if g, ok := p.TokenGrant(); ok && len(g.Scopes) > 0 && perm != Authenticated && !slices.Contains(g.Scopes, string(perm)) {
		return apperr.New(apperr.Forbidden, "this token's scopes (%s) do not include %s", strings.Join(g.Scopes, ", "), perm)
	}
	if p.IsPlatformAdmin() {
		return nil
	}
	if perm == PlatformAdmin {
		return apperr.New(apperr.Forbidden, "only a platform admin may do this")
	}
	if perm == Authenticated {
		return nil
	}
	role, err := r.Role(ctx, p, orgID, projectID)
	if err != nil {
		return err
	}
	if role == "" {
		// A project override may grant access below an organization the
		// principal has no organization-wide role in.
		return apperr.New(apperr.NotFound, "not found")
	}
	if !Grants(role, perm) {
		return apperr.New(apperr.Forbidden, "your role %q does not grant %s", role, perm)
	}
	return nil
}

// Readable is where a principal may read (tracker.read): everywhere, or
// in every project of Orgs and in Projects.
type Readable struct {
	All      bool
	Orgs     []string // organization ids
	Projects []string // project ids (in organizations not in Orgs)
}

// Readable returns where p may read, in one read of memberships, by the
// rules of Check: a token only in its organization, within its creator's
// current roles there, and only if its scopes allow tracker.read.
func (r *Resolver) Readable(ctx context.Context, p Principal) (Readable, error) {
	g, isToken := p.TokenGrant()
	if isToken && len(g.Scopes) > 0 && !slices.Contains(g.Scopes, string(TrackerRead)) {
		return Readable{}, nil
	}
	if p.IsPlatformAdmin() {
		return Readable{All: true}, nil
	}
	subject, where, args := p.AccessSubject(), `subject = ?`, []any{}
	if isToken {
		switch {
		case g.OrgID == "" || !Grants(g.Role, TrackerRead):
			return Readable{}, nil
		case g.CappedBy == "":
			return Readable{Orgs: []string{g.OrgID}}, nil
		}
		subject, where = g.CappedBy, `subject = ? AND organization_id = ?`
		args = append(args, g.OrgID)
	}
	rows, err := r.Store.Query(ctx, `SELECT organization_id, project_id, role FROM memberships WHERE `+where+` ORDER BY organization_id, project_id`,
		append([]any{subject}, args...)...)
	if err != nil {
		return Readable{}, fmt.Errorf("read memberships: %w", err)
	}
	var out Readable
	orgRole := map[string]bool{}
	for i := range rows.Len() {
		var org, project, role string
		if err := rows.Scan(i, &org, &project, &role); err != nil {
			return Readable{}, err
		}
		switch {
		case project == "" && Grants(role, TrackerRead):
			orgRole[org] = true
			out.Orgs = append(out.Orgs, org)
		case project != "" && Grants(role, TrackerRead) && !orgRole[org]: // rows of an org come after its organization role
			out.Projects = append(out.Projects, project)
		}
	}
	return out, nil
}
