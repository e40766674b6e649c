package server

import (
	"context"
	"fmt"

	"github.com/ballet/ballet/internal/bounds"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tenancy"
)

// History serves the histories of the entities that are neither items nor
// projects (those are Items'): an organization's own events, the
// platform's, a runner's and a token's. Each is read with the
// authorization of its entity, paged by seq like every history.
type History struct {
	Store  event.Querier
	Tokens TokenFinder
}

// TokenFinder finds a token the caller may see (auth.TokenService).
type TokenFinder interface {
	Find(ctx context.Context, p *auth.Principal, id string) (auth.Token, error)
}

// Routes returns the history endpoints.
func (h *History) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/orgs/{org}/events", Perm: access.MemberManage,
			Summary:  "An organization's own history: the events of no project (the organization, its members, its tokens) in seq order (after, limit 1–1000)",
			Response: EventPage{}, Handle: h.orgEvents},
		{Method: "GET", Path: "/api/v1/platform/events", Perm: access.Authenticated,
			Summary:  "The platform's history in seq order (after, limit 1–1000): the kill switch and limit for everyone who can read the platform; platform admins also read the other events of no organization (runners, browser sessions, platform tokens)",
			Response: EventPage{}, Handle: h.platformEvents},
		{Method: "GET", Path: "/api/v1/runners/{runner}/events", Perm: access.PlatformAdmin,
			Summary:  "A runner's history (registered, updated, removed), also after its removal, in seq order (after, limit 1–1000)",
			Response: EventPage{}, Handle: h.runnerEvents},
		{Method: "GET", Path: "/api/v1/tokens/{id}/events", Perm: access.Authenticated,
			Summary:  "A token's history (created, revoked) for its creator or a platform admin, in seq order (after, limit 1–1000)",
			Response: EventPage{}, Handle: h.tokenEvents},
	}
}

func (h *History) orgEvents(r *Request) (any, error) {
	o, err := r.Org()
	if err != nil {
		return nil, err
	}
	return h.list(r, event.Filter{OrganizationID: o.ID, OrganizationOnly: true})
}

// platformEvents reads the platform's history with the authorization of
// each entity in it: the platform itself (the kill switch, the limit) is
// everyone's to read, as GET /api/v1/platform is; runners, browser sessions
// and platform tokens are the platform admins'.
func (h *History) platformEvents(r *Request) (any, error) {
	r.Checked()
	f := event.Filter{PlatformOnly: true}
	if !r.Principal.PlatformAdmin {
		f.EntityType = event.EntityOf[tenancy.PlatformPaused]()
	}
	return h.list(r, f)
}

func (h *History) runnerEvents(r *Request) (any, error) {
	if err := r.Check("", ""); err != nil {
		return nil, err
	}
	id := r.PathValue("runner")
	// A removed runner keeps its history: it is found by its events.
	first, err := event.List(r.Context(), h.Store, event.Filter{EntityType: event.EntityOf[run.RunnerRegistered](), EntityID: id, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(first) == 0 {
		return nil, apperr.New(apperr.NotFound, "runner %q not found", id)
	}
	return h.list(r, event.Filter{EntityType: event.EntityOf[run.RunnerRegistered](), EntityID: id})
}

func (h *History) tokenEvents(r *Request) (any, error) {
	r.Checked() // only the token's creator or a platform admin finds it
	t, err := h.Tokens.Find(r.Context(), r.Principal, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return h.list(r, event.Filter{EntityType: event.EntityOf[auth.TokenRevoked](), EntityID: t.ID})
}

// list answers the page of f's events the query asks for (after, limit).
func (h *History) list(r *Request, f event.Filter) (any, error) {
	after, limit, err := eventPage(r)
	if err != nil {
		return nil, err
	}
	f.AfterSeq, f.Limit = after, limit
	evs, err := event.List(r.Context(), h.Store, f)
	if err != nil {
		return nil, err
	}
	return page(r, h.Store, evs, after)
}

// eventPage reads a history's after and limit.
func eventPage(r *Request) (after int64, limit int, err error) {
	if after, err = r.QueryInt("after", 0, bounds.After.Min, bounds.After.Max); err != nil {
		return 0, 0, err
	}
	l, err := r.QueryInt("limit", 100, 1, 1000)
	return after, int(l), err
}

// page answers a page of events. An empty page after a seq beyond the
// log's head is an error naming the head: a client that kept polling from
// there would silently skip every event up to it.
func page(r *Request, q event.Querier, events []event.Event, after int64) (EventPage, error) {
	out := EventPage{Events: events, LastSeq: after}
	if n := len(events); n > 0 {
		out.LastSeq = events[n-1].Seq
		return out, nil
	}
	out.Events = []event.Event{}
	if after > 0 {
		head, err := event.LastSeq(r.Context(), q)
		if err != nil {
			return out, err
		}
		if after > head {
			return out, apperr.Fields([]apperr.FieldError{{Field: "after",
				Message: fmt.Sprintf("%d is beyond the log's head (seq %d): resume from a seq you received", after, head)}})
		}
	}
	return out, nil
}
