package tenancy

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Organization is a tenant.
type Organization struct {
	ID        string    `json:"id"`
	Slug      string    `json:"slug"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// OrganizationInput is a new organization.
type OrganizationInput struct {
	Slug string
	Name string
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$`)

func (c OrganizationInput) validate() error {
	var v apperr.Validator
	v.Check(slugRE.MatchString(c.Slug), "slug", "%q must be 3–40 lower-case letters, digits or dashes, not starting or ending with a dash", c.Slug)
	if _, err := uuid.Parse(c.Slug); err == nil {
		// Organizations are found by slug or id: this slug would shadow
		// (or be shadowed by) the organization with that id.
		v.Add("slug", "%q has the shape of an id (a UUID); a slug must not look like one", c.Slug)
	}
	v.Check(strings.TrimSpace(c.Name) != "" && len(c.Name) <= 200, "name", "must be 1–200 characters")
	v.CheckErr("name", text.Line(c.Name))
	return v.Err()
}

const orgColumns = `id, slug, name, created_at, updated_at, version`

func scanOrg(rows *store.Rows, i int) (Organization, error) {
	var o Organization
	var c, u int64
	err := rows.Scan(i, &o.ID, &o.Slug, &o.Name, &c, &u, &o.Version)
	o.CreatedAt, o.UpdatedAt = store.Time(c), store.Time(u)
	return o, err
}

// CreateOrganization creates an organization. Its members are then set
// with SetMember.
func (s *Service) CreateOrganization(ctx context.Context, actor event.Actor, in OrganizationInput) (Organization, error) {
	if err := in.validate(); err != nil {
		return Organization{}, err
	}
	now := s.now()
	o := Organization{ID: transition.NewID(), Slug: in.Slug, Name: strings.TrimSpace(in.Name), CreatedAt: now, UpdatedAt: now, Version: 1}
	t := &transition.Transition{
		Events: []event.Event{event.Of(actor, o.ID, "", o.ID, OrganizationCreated(o))},
		Statements: []store.Statement{store.Stmt(`INSERT INTO organizations (`+orgColumns+`) VALUES (?, ?, ?, ?, ?, 1)`,
			o.ID, o.Slug, o.Name, now.UnixMilli(), now.UnixMilli())},
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		if store.UniqueOn(err, "organizations.slug") {
			return Organization{}, apperr.New(apperr.Conflict, "an organization with slug %q exists", in.Slug)
		}
		return Organization{}, err
	}
	return o, nil
}

// FindOrganization finds an organization by slug or id. Slugs cannot look
// like ids; should an old one do, the id wins.
func (s *Service) FindOrganization(ctx context.Context, ref string) (Organization, error) {
	return ReadOrganization(ctx, s.Store, ref)
}

// ReadOrganization is FindOrganization on the store st, for a package that
// has no Service (auth's token service resolves a token's organization).
func ReadOrganization(ctx context.Context, st store.Store, ref string) (Organization, error) {
	rows, err := store.One(ctx, st, fmt.Sprintf("organization %q", ref), `SELECT `+orgColumns+` FROM organizations WHERE slug = ? OR id = ?
ORDER BY id = ? DESC LIMIT 1`, ref, ref, ref)
	if err != nil {
		return Organization{}, err
	}
	return scanOrg(rows, 0)
}

// ListOrganizations lists every organization (all: platform admins) or
// those the subject has a role in.
func (s *Service) ListOrganizations(ctx context.Context, subject string, all bool) ([]Organization, error) {
	q := `SELECT ` + orgColumns + ` FROM organizations ORDER BY slug`
	var args []any
	if !all {
		q = `SELECT ` + orgColumns + ` FROM organizations WHERE id IN (SELECT organization_id FROM memberships WHERE subject = ?) ORDER BY slug`
		args = append(args, subject)
	}
	rows, err := s.Store.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	return store.ScanAll(rows, scanOrg)
}
