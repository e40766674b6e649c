package realtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// stream is a resolved, authorized subscription scope.
//
//   - project:KEY (or id): every event whose project_id is the project.
//   - item:KEY-N (or id): the item's own events (entity_type ticket or epic
//     with entity_id = the item) and those of its questions, flows and runs
//     (entity_type question/flow/run whose row has item_id = the item).
//     Blockers, comments and other entities appear as ticket events of the
//     item when the tracker records them so.
//   - org:SLUG (or id): every event whose organization_id is the
//     organization; needs tracker.read at organization level (a principal
//     with only project overrides subscribes per project). The events of
//     no project (the organization's own history: the organization, its
//     members, its tokens) come only to a caller holding member.manage
//     there, as GET /orgs/{org}/events answers them.
//   - notifications: the caller's own notification.created and
//     notification.read events (the events of the inbox, GET
//     /api/v1/me/notifications/inbox): of no organization, so no other
//     stream carries them; each is delivered only when its recipient is
//     the caller's person and the caller may read the notification's
//     project now (tracker.read, checked as each event is delivered), as
//     the inbox lists it.
type stream struct {
	name      string
	orgID     string
	projectID string
	itemID    string
	// replay is the database filter of the replay (exact for project and
	// org streams; a superset for item streams, refined by visible).
	replay event.Filter
	// live is the feed filter (cheap: runs on the tailer).
	live func(event.Event) bool
	// children caches whether a question/flow/run id belongs to the item.
	mu       sync.Mutex
	children map[string]bool
	// orgHistory: the caller may read the organization's own events (of
	// no project: the organization, its members, its tokens), which need
	// member.manage as GET /orgs/{org}/events does; set by authorize.
	orgHistory atomic.Bool
	// inbox marks the notifications stream; recipient is the person whose
	// notifications it carries; reader is the caller's principal as last
	// authorized, whose tracker.read each notification's project needs.
	inbox     bool
	recipient string
	reader    atomic.Pointer[auth.Principal]
	check     func(ctx context.Context, p access.Principal, orgID, projectID string) error
}

// NotificationsStream is the stream of the caller's own notifications.
const NotificationsStream = "notifications"

// entityNotification is the entity of notify's events.
const entityNotification = "notification"

// person is whose notifications a principal reads: the human signed in,
// or the human an API token acts for (as the inbox answers them).
func person(p *auth.Principal) string {
	if p.ActingFor != "" {
		return p.ActingFor
	}
	return p.Subject
}

// hasInbox reports whether p may follow its person's notifications: a
// runner's or a run's token acts for no person's inbox.
func hasInbox(p *auth.Principal) bool {
	return p.TokenID == "" || p.TokenKind == auth.KindAPI
}

// notificationOf returns the recipient of a notification event ("" for
// any other event). Cheap enough for the feed's filter: it decodes only
// the payloads of notify's two event types.
func notificationOf(e event.Event) string {
	if e.EntityType != entityNotification || e.OrganizationID != "" || e.ProjectID != "" {
		return ""
	}
	if c, ok, err := event.Decode[notify.NotificationCreated](e); ok && err == nil {
		return c.Recipient
	}
	if r, ok, err := event.Decode[notify.NotificationRead](e); ok && err == nil {
		return r.Recipient
	}
	return ""
}

const streamForms = `invalid params: stream must be "project:KEY", "item:KEY-N", "org:SLUG" or "notifications"`

const maxChildCache = 10000

// resolveStream parses a stream name and finds its scope. Unknown streams
// answer CodeForbidden, as streams the caller may not read do (authorize),
// so a caller cannot probe for other organizations' keys.
func (h *Handler) resolveStream(ctx context.Context, name string, p *auth.Principal) (*stream, *Error) {
	if name == NotificationsStream {
		return h.notificationsStream(p), nil
	}
	kind, ref, ok := strings.Cut(name, ":")
	if !ok || ref == "" || strings.TrimSpace(ref) != ref {
		return nil, rpcErr(CodeInvalidParams, streamForms)
	}
	s := &stream{name: name}
	var err error
	switch kind {
	case "project":
		var pr tenancy.Project
		if pr, err = h.Tenancy.FindProject(ctx, ref); err == nil {
			s.orgID, s.projectID = pr.OrganizationID, pr.ID
		}
	case "item":
		var it tracker.Item
		if it, err = h.Tracker.FindItem(ctx, ref); err == nil {
			s.orgID, s.projectID, s.itemID = it.OrganizationID, it.ProjectID, it.ID
		}
	case "org":
		var o tenancy.Organization
		if o, err = h.Tenancy.FindOrganization(ctx, ref); err == nil {
			s.orgID = o.ID
		}
	default:
		return nil, rpcErr(CodeInvalidParams, streamForms)
	}
	if e := h.refusal(name, err); e != nil {
		return nil, e
	}
	switch {
	case s.itemID != "":
		pid := s.projectID
		s.replay = event.Filter{ProjectID: pid}
		s.live = func(e event.Event) bool { return e.ProjectID == pid }
		s.children = map[string]bool{}
	case s.projectID != "":
		pid := s.projectID
		s.replay = event.Filter{ProjectID: pid}
		s.live = func(e event.Event) bool { return e.ProjectID == pid }
	default:
		oid := s.orgID
		s.replay = event.Filter{OrganizationID: oid}
		s.live = func(e event.Event) bool { return e.OrganizationID == oid }
	}
	return s, nil
}

// notificationsStream is the stream of p's person's notifications: the
// feed passes only the events whose recipient is that person; visible
// then checks each one's project against the caller's access.
func (h *Handler) notificationsStream(p *auth.Principal) *stream {
	s := &stream{name: NotificationsStream, inbox: true, recipient: person(p), check: func(ctx context.Context, p access.Principal, orgID, projectID string) error {
		return h.Access.Check(ctx, p, access.TrackerRead, orgID, projectID)
	}}
	s.replay = event.Filter{EntityType: entityNotification}
	s.live = func(e event.Event) bool { return notificationOf(e) == s.recipient }
	return s
}

// authorize checks that p may read the stream now: tracker.read on its
// project (its organization for org streams); for the notifications
// stream, that p is still the person whose notifications it carries.
func (h *Handler) authorize(ctx context.Context, p *auth.Principal, s *stream) *Error {
	if s.inbox {
		if !hasInbox(p) || s.recipient == "" || person(p) != s.recipient {
			return rpcErr(CodeForbidden, "forbidden stream %q: it does not exist or you may not read it", s.name)
		}
		s.reader.Store(p)
		return nil
	}
	if e := h.refusal(s.name, h.Access.Check(ctx, p, access.TrackerRead, s.orgID, s.projectID)); e != nil {
		return e
	}
	if s.projectID == "" {
		err := h.Access.Check(ctx, p, access.MemberManage, s.orgID, "")
		switch code := apperr.Code(err); {
		case err == nil:
			s.orgHistory.Store(true)
		case code == apperr.Forbidden || code == apperr.NotFound:
			s.orgHistory.Store(false)
		default:
			return h.refusal(s.name, err)
		}
	}
	return nil
}

// refusal turns a lookup or access error into the stream's refusal: the
// same CodeForbidden for a stream that does not exist and one the caller
// may not read, CodeUnavailable (logged) when it cannot be decided now.
func (h *Handler) refusal(name string, err error) *Error {
	switch {
	case err == nil:
		return nil
	case apperr.Code(err) == apperr.NotFound || apperr.Code(err) == apperr.Forbidden:
		return rpcErr(CodeForbidden, "forbidden stream %q: it does not exist or you may not read it", name)
	}
	h.Log.Error("realtime: resolving a stream failed", "stream", name, "err", err)
	return rpcErr(CodeUnavailable, "cannot resolve stream %q now; retry", name)
}

// visible reports whether an event that passed the coarse filter belongs to
// the stream.
func (s *stream) visible(ctx context.Context, q event.Querier, e event.Event) (bool, error) {
	if s.inbox {
		return s.mine(ctx, q, e)
	}
	if s.itemID == "" {
		if s.projectID == "" && e.ProjectID == "" && !s.orgHistory.Load() {
			return false, nil // the organization's own history: member.manage
		}
		return s.live(e), nil
	}
	if e.ProjectID != s.projectID {
		return false, nil
	}
	var table string
	switch e.EntityType {
	case "ticket", "epic":
		return e.EntityID == s.itemID, nil
	case "question":
		table = "questions"
	case "flow":
		table = "flows"
	case "run":
		table = "runs"
	default:
		return false, nil
	}
	s.mu.Lock()
	v, ok := s.children[e.EntityID]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	rows, err := q.Query(ctx, `SELECT item_id FROM `+table+` WHERE id = ?`, e.EntityID)
	if err != nil {
		return false, fmt.Errorf("resolve %s %s: %w", e.EntityType, e.EntityID, err)
	}
	v = false
	if rows.Len() > 0 {
		var itemID string
		if err := rows.Scan(0, &itemID); err != nil {
			return false, err
		}
		v = itemID == s.itemID
	}
	s.mu.Lock()
	if len(s.children) >= maxChildCache {
		clear(s.children)
	}
	s.children[e.EntityID] = v
	s.mu.Unlock()
	return v, nil
}

// mine reports whether a notification event is the caller's to receive:
// its recipient is the caller's person, and the caller may read its
// project now (a member removed meanwhile, or a token of another
// organization, receives nothing of it, as the inbox lists nothing of it).
func (s *stream) mine(ctx context.Context, q event.Querier, e event.Event) (bool, error) {
	if s.recipient == "" || notificationOf(e) != s.recipient {
		return false, nil
	}
	orgID, projectID, ok, err := notify.Scope(ctx, q, e.EntityID, s.recipient)
	if err != nil {
		return false, err
	}
	p := s.reader.Load()
	if !ok || p == nil {
		return false, nil
	}
	switch err := s.check(ctx, p, orgID, projectID); {
	case err == nil:
		return true, nil
	case apperr.Code(err) == apperr.NotFound || apperr.Code(err) == apperr.Forbidden:
		return false, nil
	default:
		return false, fmt.Errorf("check notification %s: %w", e.EntityID, err)
	}
}
