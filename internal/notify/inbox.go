package notify

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Inbox limits.
const (
	DefaultPage = 50
	MaxPage     = 200
	// MaxReadAll bounds how many notifications one "mark all read" marks
	// (each is a change with its event); the rest stay unread for the next.
	MaxReadAll = 500
)

// Readable tells whether the caller may read a project now (the access
// check of the request): a notification of a project the caller may no
// longer read is neither listed nor counted.
type Readable func(ctx context.Context, orgID, projectID string) (bool, error)

// Inbox reads and marks a person's notifications.
type Inbox struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
}

// Page is a page of a person's notifications, newest first.
type Page struct {
	Notifications []Notification `json:"notifications"`
	// Unread counts the person's unread notifications (in the projects
	// they may read), on every page.
	Unread int64 `json:"unread"`
	// NextBefore, when set, fetches the next (older) page as ?before=.
	NextBefore *int64 `json:"next_before"`
}

// Filter selects a page of notifications.
type Filter struct {
	UnreadOnly bool
	Before     int64 // notifications of events before this seq (0: from the newest)
	Limit      int
}

const columns = `id, recipient, cause, event_id, event_seq, organization_id, project_id, item_id, item_key, title, text, link,
created_at, read_at, version`

func scan(rows *store.Rows) ([]Notification, error) {
	out := make([]Notification, rows.Len())
	for i := range out {
		x := &out[i]
		var created int64
		var read sql.NullInt64
		if err := rows.Scan(i, &x.ID, &x.recipient, &x.Cause, &x.eventID, &x.EventSeq, &x.OrganizationID, &x.ProjectID, &x.ItemID,
			&x.Item, &x.Title, &x.Text, &x.Link, &created, &read, &x.Version); err != nil {
			return nil, fmt.Errorf("scan notification: %w", err)
		}
		x.CreatedAt = store.Time(created)
		if read.Valid {
			t := store.Time(read.Int64)
			x.ReadAt = &t
		}
	}
	return out, nil
}

// List returns a page of person's notifications, newest first, with the
// unread count; only those of projects may reads.
func (b *Inbox) List(ctx context.Context, person string, may Readable, f Filter) (Page, error) {
	if f.Limit <= 0 || f.Limit > MaxPage {
		f.Limit = DefaultPage
	}
	where, args := []string{"recipient = ?"}, []any{person}
	if f.UnreadOnly {
		where = append(where, "read_at IS NULL")
	}
	if f.Before > 0 {
		where, args = append(where, "event_seq < ?"), append(args, f.Before)
	}
	rows, err := b.Store.Query(ctx, `SELECT `+columns+` FROM notifications WHERE `+strings.Join(where, " AND ")+
		` ORDER BY event_seq DESC, id LIMIT ?`, append(args, f.Limit+1)...)
	if err != nil {
		return Page{}, fmt.Errorf("list notifications: %w", err)
	}
	all, err := scan(rows)
	if err != nil {
		return Page{}, err
	}
	page := Page{Notifications: []Notification{}}
	if len(all) > f.Limit {
		all = all[:f.Limit]
		next := all[f.Limit-1].EventSeq
		page.NextBefore = &next
	}
	readable := map[string]bool{}
	ok := func(orgID, projectID string) (bool, error) {
		if r, seen := readable[projectID]; seen {
			return r, nil
		}
		r, err := may(ctx, orgID, projectID)
		readable[projectID] = r
		return r, err
	}
	for _, x := range all {
		r, err := ok(x.OrganizationID, x.ProjectID)
		if err != nil {
			return Page{}, err
		}
		if r {
			page.Notifications = append(page.Notifications, x)
		}
	}
	counts, err := b.Store.Query(ctx, `SELECT organization_id, project_id, COUNT(*) FROM notifications WHERE recipient = ? AND read_at IS NULL
GROUP BY organization_id, project_id`, person)
	if err != nil {
		return Page{}, fmt.Errorf("count unread notifications: %w", err)
	}
	for i := range counts.Len() {
		var org, project string
		var n int64
		if err := counts.Scan(i, &org, &project, &n); err != nil {
			return Page{}, err
		}
		r, err := ok(org, project)
		if err != nil {
			return Page{}, err
		}
		if r {
			page.Unread += n
		}
	}
	return page, nil
}

// MarkRead marks one of person's notifications read and returns it. A
// notification of someone else, or of a project person may no longer
// read, is not found; one read already is returned as it is.
func (b *Inbox) MarkRead(ctx context.Context, actor event.Actor, person string, may Readable, id string) (Notification, error) {
	var out Notification
	_, err := b.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		rows, err := b.Store.Query(ctx, `SELECT `+columns+` FROM notifications WHERE id = ? AND recipient = ?`, id, person)
		if err != nil {
			return nil, fmt.Errorf("read notification: %w", err)
		}
		found, err := scan(rows)
		if err != nil {
			return nil, err
		}
		if len(found) == 1 {
			if ok, err := may(ctx, found[0].OrganizationID, found[0].ProjectID); err != nil || !ok {
				found = nil
				if err != nil {
					return nil, err
				}
			}
		}
		if len(found) == 0 {
			return nil, apperr.New(apperr.NotFound, "notification %q not found", id)
		}
		out = found[0]
		if out.ReadAt != nil {
			return nil, nil // read already: no change, no event
		}
		var t *transition.Transition
		out, t = markRead(actor, out, b.now())
		return t, nil
	})
	return out, err
}

// ReadAll marks person's unread notifications read (at most MaxReadAll,
// the oldest first) in the projects person may read, and returns how many.
func (b *Inbox) ReadAll(ctx context.Context, actor event.Actor, person string, may Readable) (int, error) {
	marked := 0
	_, err := b.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		rows, err := b.Store.Query(ctx, `SELECT `+columns+` FROM notifications WHERE recipient = ? AND read_at IS NULL
ORDER BY event_seq, id LIMIT ?`, person, MaxReadAll)
		if err != nil {
			return nil, fmt.Errorf("read unread notifications: %w", err)
		}
		unread, err := scan(rows)
		if err != nil {
			return nil, err
		}
		all := &transition.Transition{}
		now := b.now()
		readable := map[string]bool{}
		for _, x := range unread {
			r, seen := readable[x.ProjectID]
			if !seen {
				if r, err = may(ctx, x.OrganizationID, x.ProjectID); err != nil {
					return nil, err
				}
				readable[x.ProjectID] = r
			}
			if r {
				_, t := markRead(actor, x, now)
				all.Add(*t)
			}
		}
		marked = len(all.Events)
		if marked == 0 {
			return nil, nil
		}
		return all, nil
	})
	return marked, err
}

// markRead decides marking x read: the notification as it becomes, and
// its guarded update with its event.
func markRead(actor event.Actor, x Notification, now time.Time) (Notification, *transition.Transition) {
	next := x
	next.ReadAt, next.Version = &now, x.Version+1
	return next, &transition.Transition{
		Events: []event.Event{event.Of(actor, "", "", x.ID, NotificationRead{Recipient: x.recipient, Cause: x.Cause, Item: x.Item})},
		Guarded: []store.Statement{store.Stmt(`UPDATE notifications SET read_at = ?, version = version + 1 WHERE id = ? AND version = ? AND read_at IS NULL`,
			now.UnixMilli(), x.ID, x.Version)},
	}
}

func (b *Inbox) now() time.Time { return b.Clock.Now().Truncate(time.Millisecond) }

// Querier reads the database (a store.Store, or the realtime API's).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
}

// Scope returns the organization and project of recipient's notification
// id; ok is false when recipient has no such notification. The realtime
// API's notifications stream checks the caller's access to the project
// with it, as List does.
func Scope(ctx context.Context, q Querier, id, recipient string) (orgID, projectID string, ok bool, err error) {
	rows, err := q.Query(ctx, `SELECT organization_id, project_id FROM notifications WHERE id = ? AND recipient = ?`, id, recipient)
	if err != nil {
		return "", "", false, fmt.Errorf("read notification %s: %w", id, err)
	}
	if rows.Len() == 0 {
		return "", "", false, nil
	}
	if err := rows.Scan(0, &orgID, &projectID); err != nil {
		return "", "", false, fmt.Errorf("read notification %s: %w", id, err)
	}
	return orgID, projectID, true, nil
}
