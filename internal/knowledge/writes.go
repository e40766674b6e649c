package knowledge

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

func textMultiline(s string) error { return text.Multiline(s) }

func joinTags(tags []string) string { return strings.Join(tags, ", ") }

// ---- pure decisions ----

// decideSave decides a save of c over cur, which the caller based on
// version basedOn: the entry at its next version, or a conflict when cur
// moved on (stale) or is deleted. same is true when c changes nothing: the
// save is then a no-op answering cur.
func decideSave(cur Entry, basedOn int64, c Content, actor string, now time.Time) (next Entry, same bool, err error) {
	if err := writable(cur, basedOn); err != nil {
		return Entry{}, false, err
	}
	if c.same(cur) {
		return cur, true, nil
	}
	next = cur
	next.Title, next.Body, next.Tags, next.Note = c.Title, c.Body, c.Tags, c.Note
	next.Version, next.UpdatedAt, next.UpdatedBy = cur.Version+1, now, actor
	return next, false, nil
}

// writable checks that a write based on version basedOn may go on cur.
func writable(cur Entry, basedOn int64) error {
	if cur.Deleted {
		return apperr.New(apperr.Conflict, "entry %q is deleted: undelete it first", cur.Slug)
	}
	if basedOn != cur.Version {
		return apperr.New(apperr.Conflict,
			"entry %q was changed by someone else: it is at version %d, the save was based on version %d (read it again and retry)",
			cur.Slug, cur.Version, basedOn)
	}
	return nil
}

// decideRestore decides the restore of version old over cur: always a new
// version (even of the same content, so that the history shows it).
func decideRestore(cur Entry, basedOn int64, old Version, actor string, now time.Time) (Entry, error) {
	if err := writable(cur, basedOn); err != nil {
		return Entry{}, err
	}
	next := cur
	next.Title, next.Body, next.Tags = old.Title, old.Body, old.Tags
	next.Note = "restored from version " + strconv.FormatInt(old.Version, 10)
	next.Version, next.UpdatedAt, next.UpdatedBy = cur.Version+1, now, actor
	return next, nil
}

// decideDeleted decides a deletion (deleted true) or an undeletion: a
// no-op (same) when the entry already is so.
func decideDeleted(cur Entry, deleted bool, actor string, now time.Time) (next Entry, same bool) {
	if cur.Deleted == deleted {
		return cur, true
	}
	next = cur
	next.Deleted, next.UpdatedAt, next.UpdatedBy = deleted, now, actor
	return next, false
}

// ---- batch parts (pure) ----

func versionInsert(e Entry) store.Statement {
	return store.Stmt(`INSERT INTO entry_versions (entry_id, version, title, body, tags, author, at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Version, e.Title, e.Body, tagsJSON(e.Tags), e.UpdatedBy, e.UpdatedAt.UnixMilli(), e.Note)
}

// indexInsert adds the entry's current version to the search index, keyed
// by the entry's rowid (the entry's row comes first in the batch).
func indexInsert(org string, e Entry) store.Statement {
	return store.Stmt(`INSERT INTO entry_search (rowid, title, body, tags, scope) SELECT rowid, ?, ?, ?, ? FROM entries WHERE id = ?`,
		e.Title, e.Body, joinTags(e.Tags), orgToken(org)+" "+spaceToken(org, e.Space), e.ID)
}

// indexUpdate replaces the entry's row in the search index.
func indexUpdate(e Entry) store.Statement {
	return store.Stmt(`UPDATE entry_search SET title = ?, body = ?, tags = ? WHERE rowid = (SELECT rowid FROM entries WHERE id = ?)`,
		e.Title, e.Body, joinTags(e.Tags), e.ID)
}

// saveTransition writes next, the version after cur's: the entry's row
// (guarded by cur's version, and not deleted), its version row, its index
// row and its event.
func saveTransition(actor event.Actor, org string, cur, next Entry, ev event.Event) *transition.Transition {
	return &transition.Transition{
		Events: []event.Event{ev},
		Guarded: []store.Statement{store.Stmt(`UPDATE entries SET title = ?, body = ?, tags = ?, version = ?, note = ?, updated_at = ?, updated_by = ?
WHERE id = ? AND version = ? AND deleted = 0`, next.Title, next.Body, tagsJSON(next.Tags), next.Version, next.Note,
			next.UpdatedAt.UnixMilli(), next.UpdatedBy, cur.ID, cur.Version)},
		Statements: []store.Statement{versionInsert(next), indexUpdate(next)},
	}
}

// deletedTransition writes next, cur deleted or undeleted: the entry's
// row (guarded by cur's version and deletion) and its event.
func deletedTransition(actor event.Actor, org string, cur, next Entry, kind func(EntryPayload) event.Payload) *transition.Transition {
	return &transition.Transition{
		Events: []event.Event{entryEvent(actor, org, next, kind, 0)},
		Guarded: []store.Statement{store.Stmt(`UPDATE entries SET deleted = ?, updated_at = ?, updated_by = ? WHERE id = ? AND version = ? AND deleted = ?`,
			b2i(next.Deleted), next.UpdatedAt.UnixMilli(), next.UpdatedBy, cur.ID, cur.Version, b2i(cur.Deleted))},
	}
}

// ---- writes ----

// EntryInput creates an entry.
type EntryInput struct {
	Slug string
	Content
}

// CreateEntry creates an entry at version 1 (and the default space's row
// with the first entry in it).
func (s *Service) CreateEntry(ctx context.Context, actor event.Actor, org, space string, in EntryInput) (Entry, error) {
	var v apperr.Validator
	CheckSlug(&v, "slug", in.Slug)
	in.Content = in.Content.check(&v)
	if err := v.Err(); err != nil {
		return Entry{}, err
	}
	var out Entry
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		sp, exists, err := s.space(ctx, org, space)
		if err != nil {
			return nil, err
		}
		now := s.Clock.Now()
		t := &transition.Transition{}
		if !exists { // the default space, written with its first entry
			t.Add(insertSpace(event.System, org, sp, now.UnixMilli()))
		}
		out = Entry{ID: transition.NewID(), Space: space, Slug: in.Slug, Title: in.Title, Body: in.Body, Tags: in.Tags,
			Version: 1, CreatedAt: now, UpdatedAt: now, UpdatedBy: actor.Sub, Note: in.Note}
		t.Add(transition.Transition{
			Events: []event.Event{entryEvent(actor, org, out, created, 0)},
			Statements: []store.Statement{
				store.Stmt(`INSERT INTO entries (id, org, space, slug, title, body, tags, version, deleted, note, created_at, created_by, updated_at, updated_by)
VALUES (?, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, ?, ?, ?)`, out.ID, org, space, out.Slug, out.Title, out.Body, tagsJSON(out.Tags), out.Note,
					now.UnixMilli(), actor.Sub, now.UnixMilli(), actor.Sub),
				versionInsert(out), indexInsert(org, out),
			},
		})
		return t, nil
	})
	if store.UniqueOn(err, "entries.slug") {
		return Entry{}, apperr.New(apperr.Conflict, "entry %q exists in space %q", in.Slug, space)
	}
	if err != nil {
		return Entry{}, err
	}
	return roundTimes(out), nil
}

// roundTimes gives e's times the stored precision (milliseconds).
func roundTimes(e Entry) Entry {
	e.CreatedAt, e.UpdatedAt = store.Time(e.CreatedAt.UnixMilli()), store.Time(e.UpdatedAt.UnixMilli())
	return e
}

// Save writes a new version of an entry, based on the version basedOn
// that the caller read: a conflict when someone saved meanwhile. Of
// concurrent saves based on one version exactly one wins.
func (s *Service) Save(ctx context.Context, actor event.Actor, org, space, slug string, basedOn int64, c Content) (Entry, error) {
	var v apperr.Validator
	c = c.check(&v)
	if err := v.Err(); err != nil {
		return Entry{}, err
	}
	var out Entry
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := s.Entry(ctx, org, space, slug)
		if err != nil {
			return nil, err
		}
		next, same, err := decideSave(cur, basedOn, c, actor.Sub, s.Clock.Now())
		if err != nil || same {
			out = cur
			return nil, err
		}
		out = next
		return saveTransition(actor, org, cur, next, entryEvent(actor, org, next, updated, 0)), nil
	})
	if err != nil {
		return Entry{}, err
	}
	return roundTimes(out), nil
}

// Restore writes version n's content as a new version, based on the
// version basedOn that the caller read.
func (s *Service) Restore(ctx context.Context, actor event.Actor, org, space, slug string, n, basedOn int64) (Entry, error) {
	var out Entry
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := s.Entry(ctx, org, space, slug)
		if err != nil {
			return nil, err
		}
		old, err := s.version(ctx, cur, n)
		if err != nil {
			return nil, err
		}
		next, err := decideRestore(cur, basedOn, old, actor.Sub, s.Clock.Now())
		if err != nil {
			return nil, err
		}
		out = next
		return saveTransition(actor, org, cur, next, entryEvent(actor, org, next, restored, n)), nil
	})
	if err != nil {
		return Entry{}, err
	}
	return roundTimes(out), nil
}

// SetDeleted deletes (softly) or undeletes an entry. Its versions stay;
// a deleted entry is left out of searches and listings.
func (s *Service) SetDeleted(ctx context.Context, actor event.Actor, org, space, slug string, deleted bool) (Entry, error) {
	kind := deletion
	if !deleted {
		kind = undeletion
	}
	var out Entry
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := s.Entry(ctx, org, space, slug)
		if err != nil {
			return nil, err
		}
		next, same := decideDeleted(cur, deleted, actor.Sub, s.Clock.Now())
		out = next
		if same {
			return nil, nil
		}
		return deletedTransition(actor, org, cur, next, kind), nil
	})
	if err != nil {
		return Entry{}, err
	}
	return roundTimes(out), nil
}
