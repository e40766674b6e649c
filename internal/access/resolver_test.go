package access_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// person is a human principal.
type person string

func (p person) AccessSubject() string          { return string(p) }
func (person) IsPlatformAdmin() bool            { return false }
func (person) TokenGrant() (access.Grant, bool) { return access.Grant{}, false }

// platformAdmin is a platform admin.
type platformAdmin struct{}

func (platformAdmin) AccessSubject() string            { return "root" }
func (platformAdmin) IsPlatformAdmin() bool            { return true }
func (platformAdmin) TokenGrant() (access.Grant, bool) { return access.Grant{}, false }

// token is an API token with its grant.
type token access.Grant

func (t token) AccessSubject() string            { return "token-of-" + t.CappedBy }
func (token) IsPlatformAdmin() bool              { return false }
func (t token) TokenGrant() (access.Grant, bool) { return access.Grant(t), true }

// roles in increasing order; "" is no role. The test's own oracle: what
// Resolver must decide is spelled out here, not derived from access.
var roles = []string{"", access.Viewer, access.Member, access.Admin}

func rank(role string) int {
	for i, r := range roles {
		if r == role {
			return i
		}
	}
	panic("unknown role " + role)
}

func lesser(a, b string) string {
	if rank(a) < rank(b) {
		return a
	}
	return b
}

// permits lists what each role may do (spec: roles → permissions).
var permits = map[string][]access.Permission{
	access.Viewer: {access.TrackerRead},
	access.Member: {access.TrackerRead, access.TrackerWrite, access.RunManage},
	access.Admin:  {access.TrackerRead, access.TrackerWrite, access.RunManage, access.ProjectUpdate, access.MemberManage},
}

var scoped = []access.Permission{access.TrackerRead, access.TrackerWrite, access.RunManage, access.ProjectUpdate, access.MemberManage}

const (
	org      = "org-a"
	otherOrg = "org-b"
	project  = "proj-a1" // the project with the overrides
	sibling  = "proj-a2" // a project of the same organization without any
)

// subject names the person with an organization role and an override in
// project ("" for none).
func subject(orgRole, override string) string {
	return fmt.Sprintf("org=%s,project=%s", orgRole, override)
}

// seed records, for every organization role × project override, a person
// holding them, and one who is an admin of another organization only.
func seed(t *testing.T, s store.Store) {
	t.Helper()
	batch := []store.Statement{
		store.Stmt(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES (?, 'a', 'A', 0, 0, 1), (?, 'b', 'B', 0, 0, 1)`, org, otherOrg),
		store.Stmt(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version) VALUES (?, '', 'outsider', 'admin', 0, 0, 1)`, otherOrg),
	}
	for _, orgRole := range roles {
		for _, override := range roles {
			sub := subject(orgRole, override)
			if orgRole != "" {
				batch = append(batch, store.Stmt(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version) VALUES (?, '', ?, ?, 0, 0, 1)`, org, sub, orgRole))
			}
			if override != "" {
				batch = append(batch, store.Stmt(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version) VALUES (?, ?, ?, ?, 0, 0, 1)`, org, project, sub, override))
			}
		}
	}
	if _, err := s.Exec(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
}

// checkRole asserts Role and every Check of p in one scope against want.
func checkRole(t *testing.T, r *access.Resolver, p access.Principal, orgID, projectID, want string) {
	t.Helper()
	ctx := context.Background()
	got, err := r.Role(ctx, p, orgID, projectID)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%v in %s/%s: role %q, want %q", p, orgID, projectID, got, want)
		return
	}
	for _, perm := range scoped {
		err := r.Check(ctx, p, perm, orgID, projectID)
		granted := false
		for _, g := range permits[want] {
			granted = granted || g == perm
		}
		switch {
		case want == "":
			if !isCode(err, apperr.NotFound) {
				t.Errorf("%v without a role in %s/%s: Check(%s) = %v, want not found", p, orgID, projectID, perm, err)
			}
		case granted && err != nil:
			t.Errorf("%v as %s in %s/%s: Check(%s) = %v, want allowed", p, want, orgID, projectID, perm, err)
		case !granted && !isCode(err, apperr.Forbidden):
			t.Errorf("%v as %s in %s/%s: Check(%s) = %v, want forbidden", p, want, orgID, projectID, perm, err)
		}
	}
}

func isCode(err error, code string) bool { return err != nil && apperr.Code(err) == code }

// TestRoleAndCheckWithProjectOverrides: every organization role × project
// override, for a person and for the tokens that person created. A
// project override replaces the organization role in its project — in
// both directions, and for someone with no organization role at all — and
// nowhere else; a token acts with its own role lowered to its creator's
// role in the same scope (the override included).
func TestRoleAndCheckWithProjectOverrides(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		seed(t, s)
		r := &access.Resolver{Store: s}
		for _, orgRole := range roles {
			for _, override := range roles {
				sub := subject(orgRole, override)
				inProject := orgRole
				if override != "" {
					inProject = override
				}
				scopes := []struct{ orgID, projectID, want string }{
					{org, "", orgRole},
					{org, project, inProject},
					{org, sibling, orgRole},
					{otherOrg, "", ""},
				}
				for _, sc := range scopes {
					checkRole(t, r, person(sub), sc.orgID, sc.projectID, sc.want)
				}
				for _, tokenRole := range roles[1:] {
					tok := token{OrgID: org, Role: tokenRole, CappedBy: sub}
					for _, sc := range scopes {
						want := lesser(tokenRole, sc.want)
						if sc.orgID != org {
							want = "" // a token acts in its own organization only
						}
						checkRole(t, r, tok, sc.orgID, sc.projectID, want)
					}
				}
			}
		}
	})
}

// TestTokenWithoutCap: a token that nobody's role caps (a platform admin
// created it) has its own role in its organization, in every project, and
// nothing elsewhere; a token without a role (runner and run tokens) has
// none anywhere. A platform admin is an admin everywhere.
func TestTokenWithoutCap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		seed(t, s)
		r := &access.Resolver{Store: s}
		for _, role := range roles[1:] {
			tok := token{OrgID: org, Role: role}
			checkRole(t, r, tok, org, "", role)
			checkRole(t, r, tok, org, project, role)
			checkRole(t, r, tok, otherOrg, "", "")
		}
		checkRole(t, r, token{}, org, "", "")
		checkRole(t, r, token{}, org, project, "")
		for _, sc := range [][2]string{{org, ""}, {org, project}, {otherOrg, ""}, {"no-such-org", ""}} {
			checkRole(t, r, platformAdmin{}, sc[0], sc[1], access.Admin)
		}
		if err := r.Check(context.Background(), platformAdmin{}, access.PlatformAdmin, "", ""); err != nil {
			t.Fatalf("platform admin: %v", err)
		}
		if err := r.Check(context.Background(), person(subject(access.Admin, "")), access.PlatformAdmin, org, ""); !isCode(err, apperr.Forbidden) {
			t.Fatalf("an organization admin as platform admin: %v, want forbidden", err)
		}
		if err := r.Check(context.Background(), person("nobody"), access.Authenticated, "", ""); err != nil {
			t.Fatalf("authenticated: %v", err)
		}
	})
}

// TestHighestRole: the highest role a person holds anywhere in the
// organization, its project overrides included.
func TestHighestRole(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		seed(t, s)
		r := &access.Resolver{Store: s}
		for _, orgRole := range roles {
			for _, override := range roles {
				want := orgRole
				if rank(override) > rank(orgRole) {
					want = override
				}
				got, err := r.HighestRole(context.Background(), subject(orgRole, override), org)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("HighestRole(%s) = %q, want %q", subject(orgRole, override), got, want)
				}
			}
		}
		if got, err := r.HighestRole(context.Background(), "outsider", org); err != nil || got != "" {
			t.Fatalf("HighestRole of an outsider = %q (%v), want none", got, err)
		}
	})
}
