// Package access decides who may do what: roles per organization
// (optionally overridden per project), the permissions they grant, and the
// one Check every endpoint calls. An organization a principal has no role
// in is invisible to it: checks there fail as not found, not forbidden.
package access

import (
	"context"
	"fmt"

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

// Principal is what access needs to know about a caller.
type Principal interface {
	// Subject is the identity memberships are recorded for.
	AccessSubject() string
	// IsPlatformAdmin: may do everything.
	IsPlatformAdmin() bool
	// TokenRole, for a scoped token: the organization it is limited to and
	// the role it carries there (ok=false for humans).
	TokenRole() (orgID, role string, ok bool)
}

// Resolver reads memberships.
type Resolver struct {
	Store interface {
		Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
	}
}

// Role returns p's role in the organization, overridden by its role in the
// project when projectID is set and an override exists. "" means none.
func (r *Resolver) Role(ctx context.Context, p Principal, orgID, projectID string) (string, error) {
	if p.IsPlatformAdmin() {
		return Admin, nil
	}
	if tOrg, tRole, ok := p.TokenRole(); ok {
		if tOrg != orgID {
			return "", nil
		}
		return tRole, nil
	}
	rows, err := r.Store.Query(ctx, `SELECT project_id, role FROM memberships WHERE organization_id = ? AND subject = ? AND project_id IN ('', ?)`,
		orgID, p.AccessSubject(), projectID)
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

// Check returns nil when p holds perm in the scope; an apperr NotFound when
// p has no role there at all (the scope stays invisible); Forbidden when it
// has a role that does not grant perm.
func (r *Resolver) Check(ctx context.Context, p Principal, perm Permission, orgID, projectID string) error {
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
