package knowledge

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// ---- spaces ----

const spaceColumns = `slug, title, description, created_at, created_by`

func scanSpace(rows *store.Rows, i int) (Space, error) {
	var sp Space
	var at int64
	if err := rows.Scan(i, &sp.Slug, &sp.Title, &sp.Description, &at, &sp.CreatedBy); err != nil {
		return Space{}, err
	}
	sp.CreatedAt = store.Time(at)
	return sp, nil
}

// defaultSpace is the default space's row to write.
func defaultSpace(now time.Time) Space {
	return Space{Slug: DefaultSpace, Title: "Default", Description: "The organization's default space.", CreatedAt: now, CreatedBy: "system"}
}

// Spaces returns the organization's spaces by slug, "default" among them
// always (written on the organization's first access).
func (s *Service) Spaces(ctx context.Context, org string) ([]Space, error) {
	if _, err := s.Space(ctx, org, DefaultSpace); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT `+spaceColumns+` FROM spaces WHERE org = ? ORDER BY slug`, org)
	if err != nil {
		return nil, fmt.Errorf("read spaces: %w", err)
	}
	out := make([]Space, 0, rows.Len())
	for i := range rows.Len() {
		sp, err := scanSpace(rows, i)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// space reads one space; exists is false for a default space not yet
// written (it exists all the same: the caller may write it).
func (s *Service) space(ctx context.Context, org, slug string) (sp Space, exists bool, err error) {
	rows, err := s.query(ctx, `SELECT `+spaceColumns+` FROM spaces WHERE org = ? AND slug = ?`, org, slug)
	if err != nil {
		return Space{}, false, fmt.Errorf("read space %q: %w", slug, err)
	}
	if rows.Len() == 0 {
		if slug == DefaultSpace {
			return defaultSpace(s.Clock.Now()), false, nil
		}
		return Space{}, false, apperr.New(apperr.NotFound, "space %q not found", slug)
	}
	sp, err = scanSpace(rows, 0)
	return sp, true, err
}

// Space returns one space. The default space's row is written on the
// organization's first access, by the system, race-free: of first
// accesses at once one writes it (a guarded insert), the others re-read.
func (s *Service) Space(ctx context.Context, org, slug string) (Space, error) {
	sp, exists, err := s.space(ctx, org, slug)
	if err != nil || exists {
		return sp, err
	}
	_, err = s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		var exists bool
		sp, exists, err = s.space(ctx, org, slug)
		if err != nil || exists {
			return nil, err
		}
		t := insertSpace(event.System, org, sp, sp.CreatedAt.UnixMilli())
		return &t, nil
	})
	sp.CreatedAt = store.Time(sp.CreatedAt.UnixMilli())
	return sp, err
}

// SpaceInput creates a space.
type SpaceInput struct {
	Slug        string
	Title       string
	Description string
}

// insertSpace is the part of a transition that writes a space's row and
// its event. Guarded: a space written meanwhile is a lost race, and the
// caller's re-read finds it.
func insertSpace(actor event.Actor, org string, sp Space, now int64) transition.Transition {
	id := transition.NewID()
	return transition.Transition{
		Events: []event.Event{event.Of(actor, org, "", id, SpaceCreated{Slug: sp.Slug, Title: sp.Title})},
		Guarded: []store.Statement{store.Stmt(`INSERT INTO spaces (id, org, slug, title, description, created_at, created_by, version)
VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`, id, org, sp.Slug, sp.Title, sp.Description, now, sp.CreatedBy)},
	}
}

// CreateSpace creates a space; its slug must be new in the organization.
func (s *Service) CreateSpace(ctx context.Context, actor event.Actor, org string, in SpaceInput) (Space, error) {
	var v apperr.Validator
	CheckSpaceSlug(&v, "slug", in.Slug)
	if in.Title == "" {
		in.Title = in.Slug
	}
	checkLine(&v, "title", in.Title, MaxTitle, true)
	if len(in.Description) > MaxSpaceDoc {
		v.Add("description", "has %d bytes; at most %d", len(in.Description), MaxSpaceDoc)
	} else {
		v.CheckErr("description", textMultiline(in.Description))
	}
	if err := v.Err(); err != nil {
		return Space{}, err
	}
	var out Space
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		_, exists, err := s.space(ctx, org, in.Slug)
		if err != nil && apperr.Code(err) != apperr.NotFound {
			return nil, err
		}
		if exists || in.Slug == DefaultSpace {
			return nil, apperr.New(apperr.Conflict, "space %q exists", in.Slug)
		}
		now := s.Clock.Now()
		out = Space{Slug: in.Slug, Title: in.Title, Description: in.Description, CreatedAt: now, CreatedBy: actor.Sub}
		t := insertSpace(actor, org, out, now.UnixMilli())
		return &t, nil
	})
	if err != nil {
		return Space{}, err
	}
	out.CreatedAt = store.Time(out.CreatedAt.UnixMilli())
	return out, nil
}

// ---- entries: reads ----

const entryColumns = `id, space, slug, title, body, tags, version, deleted, note, created_at, updated_at, updated_by`

func scanEntry(rows *store.Rows, i int) (Entry, error) {
	var e Entry
	var tags string
	var deleted int
	var created, updated int64
	if err := rows.Scan(i, &e.ID, &e.Space, &e.Slug, &e.Title, &e.Body, &tags, &e.Version, &deleted, &e.Note,
		&created, &updated, &e.UpdatedBy); err != nil {
		return Entry{}, err
	}
	var err error
	if e.Tags, err = parseTags(tags); err != nil {
		return Entry{}, err
	}
	e.Deleted, e.CreatedAt, e.UpdatedAt = deleted == 1, store.Time(created), store.Time(updated)
	return e, nil
}

// Entry returns an entry's current version (deleted ones too: Deleted
// says so). Its space must exist.
func (s *Service) Entry(ctx context.Context, org, space, slug string) (Entry, error) {
	if _, err := s.Space(ctx, org, space); err != nil {
		return Entry{}, err
	}
	return s.entry(ctx, org, space, slug)
}

func (s *Service) entry(ctx context.Context, org, space, slug string) (Entry, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("entry %q", slug),
		`SELECT `+entryColumns+` FROM entries WHERE org = ? AND space = ? AND slug = ?`, org, space, slug)
	if err != nil {
		return Entry{}, err
	}
	return scanEntry(rows, 0)
}

// EntryAt returns the entry as it was at a version.
func (s *Service) EntryAt(ctx context.Context, org, space, slug string, version int64) (Entry, error) {
	e, err := s.Entry(ctx, org, space, slug)
	if err != nil {
		return Entry{}, err
	}
	if version == e.Version {
		return e, nil
	}
	v, err := s.version(ctx, e, version)
	if err != nil {
		return Entry{}, err
	}
	e.Title, e.Body, e.Tags, e.Version, e.UpdatedAt, e.UpdatedBy, e.Note = v.Title, v.Body, v.Tags, v.Version, v.At, v.Author, v.Note
	return e, nil
}

// ListOptions filter a space's entries.
type ListOptions struct {
	Tag            string
	IncludeDeleted bool
	Limit          int // 100 when 0
	After          string
}

// Entries returns a space's entries by slug (their current versions),
// at most Limit after the slug After.
func (s *Service) Entries(ctx context.Context, org, space string, o ListOptions) ([]Entry, error) {
	if _, err := s.Space(ctx, org, space); err != nil {
		return nil, err
	}
	if o.Limit <= 0 {
		o.Limit = 100
	}
	if o.Tag != "" {
		var v apperr.Validator
		if tags := normTags(&v, "tag", []string{o.Tag}); len(tags) == 1 {
			o.Tag = tags[0]
		}
		if err := v.Err(); err != nil {
			return nil, err
		}
	}
	q := `SELECT ` + entryColumns + ` FROM entries WHERE org = ? AND space = ? AND slug > ?`
	args := []any{org, space, o.After}
	if !o.IncludeDeleted {
		q += ` AND deleted = 0`
	}
	if o.Tag != "" {
		q += ` AND EXISTS (SELECT 1 FROM json_each(entries.tags) WHERE value = ?)`
		args = append(args, o.Tag)
	}
	q += ` ORDER BY slug LIMIT ?`
	args = append(args, o.Limit)
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	out := []Entry{}
	for i := range rows.Len() {
		e, err := scanEntry(rows, i)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

const versionColumns = `version, title, body, tags, author, at, note`

func scanVersion(rows *store.Rows, i int) (Version, error) {
	var v Version
	var tags string
	var at int64
	if err := rows.Scan(i, &v.Version, &v.Title, &v.Body, &tags, &v.Author, &at, &v.Note); err != nil {
		return Version{}, err
	}
	var err error
	v.Tags, err = parseTags(tags)
	v.At = store.Time(at)
	return v, err
}

func (s *Service) version(ctx context.Context, e Entry, n int64) (Version, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("version %d of entry %q", n, e.Slug),
		`SELECT `+versionColumns+` FROM entry_versions WHERE entry_id = ? AND version = ?`, e.ID, n)
	if err != nil {
		return Version{}, err
	}
	return scanVersion(rows, 0)
}

// Versions returns an entry's versions, newest first.
func (s *Service) Versions(ctx context.Context, org, space, slug string) ([]Version, error) {
	e, err := s.Entry(ctx, org, space, slug)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT `+versionColumns+` FROM entry_versions WHERE entry_id = ? ORDER BY version DESC`, e.ID)
	if err != nil {
		return nil, fmt.Errorf("read versions of %q: %w", slug, err)
	}
	out := make([]Version, 0, rows.Len())
	for i := range rows.Len() {
		v, err := scanVersion(rows, i)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// History returns an entry's events (its history as the service's log
// recorded it), oldest first.
func (s *Service) History(ctx context.Context, org, space, slug string) ([]event.Event, error) {
	e, err := s.Entry(ctx, org, space, slug)
	if err != nil {
		return nil, err
	}
	return event.List(ctx, s.Store, event.Filter{EntityType: "entry", EntityID: e.ID, Limit: event.MaxLimit})
}

// Diff returns the unified diff of an entry's body between two versions.
func (s *Service) Diff(ctx context.Context, org, space, slug string, from, to int64) (string, error) {
	a, err := s.EntryAt(ctx, org, space, slug, from)
	if err != nil {
		return "", err
	}
	b, err := s.EntryAt(ctx, org, space, slug, to)
	if err != nil {
		return "", err
	}
	return Unified(fmt.Sprintf("%s@%d", slug, from), fmt.Sprintf("%s@%d", slug, to), render(a), render(b)), nil
}

// render is what a diff compares: the title, the tags, then the body.
func render(e Entry) string {
	return "# " + e.Title + "\n" + "tags: " + joinTags(e.Tags) + "\n\n" + e.Body
}
