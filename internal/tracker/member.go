package tracker

import (
	"context"
	"encoding/json"
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

// MemberSet is the body of PUT …/members/{subject}.
type MemberSet struct {
	Role string `json:"role"`
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
		m.CreatedAt, m.UpdatedAt = ms(c), ms(u)
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
func (s *Service) SetMember(ctx context.Context, actor event.Actor, orgID, projectID, subject string, in MemberSet) (Member, error) {
	if err := validSubject(subject); err != nil {
		return Member{}, err
	}
	if !access.ValidRole(in.Role) {
		return Member{}, apperr.Fields([]apperr.FieldError{{Field: "role", Message: fmt.Sprintf("%q is not viewer, member or admin", in.Role)}})
	}
	var out Member
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, found, err := s.member(ctx, orgID, projectID, subject)
		if err != nil {
			return nil, err
		}
		now := s.now()
		if found && cur.Role == in.Role {
			out = cur
			return nil, nil
		}
		if found && projectID == "" && cur.Role == access.Admin {
			if err := s.keepAnAdmin(ctx, orgID, subject); err != nil {
				return nil, err
			}
		}
		out = Member{OrganizationID: orgID, ProjectID: projectID, Subject: subject, Role: in.Role, CreatedAt: now, UpdatedAt: now, Version: 1}
		payload, _ := json.Marshal(map[string]any{"subject": subject, "role": in.Role, "previous_role": cur.Role, "project_id": projectID})
		t := &transition.Transition{Events: []event.Event{newEvent(actor, orgID, projectID, "member", subject, "role_set", payload)}}
		if found {
			out.CreatedAt, out.Version = cur.CreatedAt, cur.Version+1
			t.Guarded = []store.Statement{store.Stmt(`UPDATE memberships SET role = ?, updated_at = ?, version = version + 1
WHERE organization_id = ? AND project_id = ? AND subject = ? AND version = ?`, in.Role, now.UnixMilli(), orgID, projectID, subject, cur.Version)}
		} else {
			t.Guarded = []store.Statement{store.Stmt(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`, orgID, projectID, subject, in.Role, now.UnixMilli(), now.UnixMilli())}
		}
		return t, nil
	})
	return out, err
}

// RemoveMember removes subject's organization role or project override.
func (s *Service) RemoveMember(ctx context.Context, actor event.Actor, orgID, projectID, subject string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, found, err := s.member(ctx, orgID, projectID, subject)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, apperr.New(apperr.NotFound, "%q is not a member here", subject)
		}
		if projectID == "" && cur.Role == access.Admin {
			if err := s.keepAnAdmin(ctx, orgID, subject); err != nil {
				return nil, err
			}
		}
		payload, _ := json.Marshal(map[string]any{"subject": subject, "previous_role": cur.Role, "project_id": projectID})
		return &transition.Transition{
			Events: []event.Event{newEvent(actor, orgID, projectID, "member", subject, "removed", payload)},
			Guarded: []store.Statement{store.Stmt(`DELETE FROM memberships WHERE organization_id = ? AND project_id = ? AND subject = ? AND version = ?`,
				orgID, projectID, subject, cur.Version)},
		}, nil
	})
	return err
}

// keepAnAdmin refuses to demote or remove the organization's last admin.
func (s *Service) keepAnAdmin(ctx context.Context, orgID, subject string) error {
	rows, err := s.Store.Query(ctx, `SELECT COUNT(*) FROM memberships WHERE organization_id = ? AND project_id = '' AND role = 'admin' AND subject <> ?`, orgID, subject)
	if err != nil {
		return fmt.Errorf("count admins: %w", err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		return err
	}
	if n == 0 {
		return apperr.New(apperr.Conflict, "%q is the organization's last admin: make someone else admin first", subject)
	}
	return nil
}

func (s *Service) member(ctx context.Context, orgID, projectID, subject string) (Member, bool, error) {
	rows, err := s.Store.Query(ctx, `SELECT role, created_at, version FROM memberships WHERE organization_id = ? AND project_id = ? AND subject = ?`,
		orgID, projectID, subject)
	if err != nil {
		return Member{}, false, fmt.Errorf("read member: %w", err)
	}
	if rows.Len() == 0 {
		return Member{}, false, nil
	}
	m := Member{OrganizationID: orgID, ProjectID: projectID, Subject: subject}
	var c int64
	if err := rows.Scan(0, &m.Role, &c, &m.Version); err != nil {
		return Member{}, false, err
	}
	m.CreatedAt = ms(c)
	return m, true, nil
}
