package tenancy

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/bounds"
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

// OrganizationPatch is a change of an organization (PATCH /orgs/{org}):
// nil fields stay as they are. Slug, when given, must be the organization's
// slug: a slug never changes, because the organization's Knowledge space,
// its addresses (/orgs/acme, bookmarks, links in mail and webhook payloads)
// and people's scripts name it.
type OrganizationPatch struct {
	Name *string
	Slug *string
}

// patchOrganization validates in against o and the version read and
// returns o changed, with the changes (pure).
func patchOrganization(o Organization, version int64, in OrganizationPatch) (Organization, OrganizationChanges, error) {
	var v apperr.Validator
	bounds.CheckVersionRead(&v, version)
	var changes OrganizationChanges
	if in.Slug != nil && *in.Slug != o.Slug {
		v.Add("slug", "an organization's slug never changes (it is %q): it names the organization's Knowledge space and addresses; "+
			"create a new organization for a new slug", o.Slug)
	}
	if in.Name == nil {
		v.Add("name", "is required: the organization's new name")
	} else {
		name := strings.TrimSpace(*in.Name)
		v.Check(name != "" && len(name) <= 200, "name", "must be 1–200 characters")
		v.CheckErr("name", text.Line(name))
		if name != o.Name {
			o.Name = name
			changes.Name = &o.Name
		}
	}
	return o, changes, v.Err()
}

// UpdateOrganization changes organization o (read at version) in one
// guarded batch with its event organization.updated; a version that is no
// longer the organization's is a 409. A patch that changes nothing writes
// nothing and answers o (still 409 on a stale version).
func (s *Service) UpdateOrganization(ctx context.Context, actor event.Actor, o Organization, version int64, in OrganizationPatch) (Organization, error) {
	o, changes, err := patchOrganization(o, version, in)
	if err != nil {
		return Organization{}, err
	}
	if changes.Name == nil {
		if version != o.Version {
			return Organization{}, transition.Stale(store.ErrLostRace, "the organization")
		}
		return o, nil
	}
	now := s.now()
	t := &transition.Transition{
		Events: []event.Event{event.Of(actor, o.ID, "", o.ID, OrganizationUpdated{Changes: changes})},
		Guarded: []store.Statement{store.Stmt(`UPDATE organizations SET name = ?, updated_at = ?, version = version + 1 WHERE id = ? AND version = ?`,
			o.Name, now.UnixMilli(), o.ID, version)},
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		return Organization{}, transition.Stale(err, "the organization")
	}
	o.Version, o.UpdatedAt = version+1, now
	return o, nil
}
