package tenancy

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Member is a subject's role in an organization, or its override in one
// project (ProjectID set).
type Member struct {
	OrganizationID string    `json:"organization_id"`
	ProjectID      string    `json:"project_id,omitempty"`
	Subject        string    `json:"subject"`
	Role           string    `json:"role"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Version        int64     `json:"version"`
}

// ListMembers lists the organization's members, or a project's overrides.
func (s *Service) ListMembers(ctx context.Context, orgID, projectID string) ([]Member, error) {
	rows, err := s.Store.Query(ctx, `SELECT organization_id, project_id, subject, role, created_at, updated_at, version
FROM memberships WHERE organization_id = ? AND project_id = ? ORDER BY subject`, orgID, projectID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	out := make([]Member, rows.Len())
	for i := range out {
		var c, u int64
		m := &out[i]
		if err := rows.Scan(i, &m.OrganizationID, &m.ProjectID, &m.Subject, &m.Role, &c, &u, &m.Version); err != nil {
			return nil, err
		}
		m.CreatedAt, m.UpdatedAt = store.Time(c), store.Time(u)
	}
	return out, nil
}

func validSubject(subject string) error {
	var v apperr.Validator
	v.Check(subject != "" && len(subject) <= 255, "subject", "must be 1–255 characters")
	v.CheckErr("subject", text.Line(subject))
	return v.Err()
}

// SetMember gives subject a role in the organization (projectID "") or a
// project override. Idempotent: setting the same role again changes
// nothing and records no event.
func (s *Service) SetMember(ctx context.Context, actor event.Actor, orgID, projectID, subject, role string) (Member, error) {
	if err := validSubject(subject); err != nil {
		return Member{}, err
	}
	if !access.ValidRole(role) {
		return Member{}, apperr.Fields([]apperr.FieldError{{Field: "role", Message: fmt.Sprintf("%q is not viewer, member or admin", role)}})
	}
	var out Member
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		st, err := s.memberships(ctx, orgID, projectID, subject)
		if err != nil {
			return nil, err
		}
		m, t, err := st.set(actor, role, s.now())
		out = m
		return t, err
	})
	return out, err
}

// RemoveMember removes subject's organization role or project override.
func (s *Service) RemoveMember(ctx context.Context, actor event.Actor, orgID, projectID, subject string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		st, err := s.memberships(ctx, orgID, projectID, subject)
		if err != nil {
			return nil, err
		}
		return st.remove(actor)
	})
	return err
}

// membershipState is what a membership change decides on, read in one
// query: the subject's current row, how many organization admins there
// are besides the subject, and the guarded statement that bumps the
// organization's membership version. Every membership change commits that
// bump, so a change decided on counts another change has since altered
// loses its race and decides again: the last-admin rule is part of the
// batch, not a read before it.
type membershipState struct {
	projectID   string
	cur         Member
	found       bool
	otherAdmins int64
	bump        store.Statement
}

// memberships reads the state of subject's membership in the organization
// (projectID "") or its override in a project.
func (s *Service) memberships(ctx context.Context, orgID, projectID, subject string) (membershipState, error) {
	rows, err := s.Store.Query(ctx, `SELECT
  COALESCE((SELECT version FROM member_versions WHERE organization_id = ?), 0),
  (SELECT COUNT(*) FROM memberships WHERE organization_id = ? AND project_id = '' AND role = 'admin' AND subject <> ?),
  m.role, m.created_at, m.version
FROM (SELECT 1) LEFT JOIN memberships m ON m.organization_id = ? AND m.project_id = ? AND m.subject = ?`,
		orgID, orgID, subject, orgID, projectID, subject)
	if err != nil {
		return membershipState{}, fmt.Errorf("read memberships: %w", err)
	}
	st := membershipState{projectID: projectID, cur: Member{OrganizationID: orgID, ProjectID: projectID, Subject: subject}}
	var v int64
	var role sql.NullString
	var created, version sql.NullInt64
	if err := rows.Scan(0, &v, &st.otherAdmins, &role, &created, &version); err != nil {
		return membershipState{}, err
	}
	if role.Valid {
		st.found = true
		st.cur.Role, st.cur.CreatedAt, st.cur.Version = role.String, store.Time(created.Int64), version.Int64
	}
	st.bump = bumpMemberVersion(orgID, v)
	return st, nil
}

// set decides giving the subject role: the member it makes and the
// transition (nil when the subject has that role already).
func (st membershipState) set(actor event.Actor, role string, now time.Time) (Member, *transition.Transition, error) {
	cur := st.cur
	if st.found && cur.Role == role {
		return cur, nil, nil
	}
	if err := st.keepsAnAdmin(role); err != nil {
		return Member{}, nil, err
	}
	orgID, projectID, subject := cur.OrganizationID, cur.ProjectID, cur.Subject
	out := Member{OrganizationID: orgID, ProjectID: projectID, Subject: subject, Role: role, CreatedAt: now, UpdatedAt: now, Version: 1}
	payload := MemberRoleSet{Subject: subject, Role: role, PreviousRole: cur.Role, ProjectID: projectID}
	t := &transition.Transition{Events: []event.Event{event.Of(actor, orgID, projectID, subject, payload)}}
	if st.found {
		out.CreatedAt, out.Version = cur.CreatedAt, cur.Version+1
		t.Guarded = []store.Statement{store.Stmt(`UPDATE memberships SET role = ?, updated_at = ?, version = version + 1
WHERE organization_id = ? AND project_id = ? AND subject = ? AND version = ?`, role, now.UnixMilli(), orgID, projectID, subject, cur.Version)}
	} else {
		t.Guarded = []store.Statement{store.Stmt(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`, orgID, projectID, subject, role, now.UnixMilli(), now.UnixMilli())}
	}
	t.Guarded = append(t.Guarded, st.bump)
	return out, t, nil
}

// remove decides removing the subject's role.
func (st membershipState) remove(actor event.Actor) (*transition.Transition, error) {
	cur := st.cur
	if !st.found {
		return nil, apperr.New(apperr.NotFound, "%q is not a member here", cur.Subject)
	}
	if err := st.keepsAnAdmin(""); err != nil {
		return nil, err
	}
	payload := MemberRemoved{Subject: cur.Subject, PreviousRole: cur.Role, ProjectID: cur.ProjectID}
	return &transition.Transition{
		Events: []event.Event{event.Of(actor, cur.OrganizationID, cur.ProjectID, cur.Subject, payload)},
		Guarded: []store.Statement{store.Stmt(`DELETE FROM memberships WHERE organization_id = ? AND project_id = ? AND subject = ? AND version = ?`,
			cur.OrganizationID, cur.ProjectID, cur.Subject, cur.Version), st.bump},
	}, nil
}

// keepsAnAdmin refuses a change that would leave the organization without
// an admin: demoting (to role) or removing (role "") its last one.
func (st membershipState) keepsAnAdmin(role string) error {
	if st.projectID != "" || !st.found || st.cur.Role != access.Admin || role == access.Admin || st.otherAdmins > 0 {
		return nil
	}
	return apperr.New(apperr.Conflict, "%q is the organization's last admin: make someone else admin first", st.cur.Subject)
}

// bumpMemberVersion returns the guarded statement that moves an
// organization's membership version (member_versions) from v to v+1
// (v = 0: there is no row yet). A change that reads v before deciding on
// the memberships, and commits the bump in the same batch, loses its race
// when another membership change committed meanwhile.
func bumpMemberVersion(orgID string, v int64) store.Statement {
	if v == 0 {
		return store.Stmt(`INSERT INTO member_versions (organization_id, version) VALUES (?, 1) ON CONFLICT DO NOTHING`, orgID)
	}
	return store.Stmt(`UPDATE member_versions SET version = version + 1 WHERE organization_id = ? AND version = ?`, orgID, v)
}
