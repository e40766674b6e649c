package realtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
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
}

const maxChildCache = 10000

// resolveStream parses a stream name and finds its scope. Unknown streams
// answer CodeForbidden, as streams the caller may not read do (authorize),
// so a caller cannot probe for other organizations' keys.
func (h *Handler) resolveStream(ctx context.Context, name string) (*stream, *Error) {
	kind, ref, ok := strings.Cut(name, ":")
	if !ok || ref == "" || strings.TrimSpace(ref) != ref {
		return nil, rpcErr(CodeInvalidParams, `invalid params: stream must be "project:KEY", "item:KEY-N" or "org:SLUG"`)
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
		return nil, rpcErr(CodeInvalidParams, `invalid params: stream must be "project:KEY", "item:KEY-N" or "org:SLUG"`)
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

// authorize checks that p may read the stream now: tracker.read on its
// project (its organization for org streams).
func (h *Handler) authorize(ctx context.Context, p access.Principal, s *stream) *Error {
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
