package server

import (
	"net/http"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/notify"
)

// Subscriptions serves the caller's subscription to a ticket: its
// questions and approvals (notify.SubscriberCauses) reach a subscriber as
// they reach its assignee. Each caller reads and changes only their own.
type Subscriptions struct {
	S *notify.Subscriptions
}

// Routes returns the subscription endpoints.
func (h *Subscriptions) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/items/{item}/subscription", Perm: access.TrackerRead,
			Summary: "Whether the caller is subscribed to the ticket", Response: notify.Subscription{}, Handle: h.get},
		{Method: "PUT", Path: "/api/v1/items/{item}/subscription", Perm: access.TrackerRead,
			Summary:  "Subscribe the caller to the ticket: its blocking questions, approvals, failure and completion reach them (idempotent)",
			Response: notify.Subscription{}, Handle: h.put},
		{Method: "DELETE", Path: "/api/v1/items/{item}/subscription", Perm: access.TrackerRead,
			Summary: "End the caller's subscription to the ticket (idempotent)", Status: http.StatusNoContent, Handle: h.remove},
	}
}

func (h *Subscriptions) get(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	return h.S.Get(r.Context(), person(r), it)
}

func (h *Subscriptions) put(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	return h.S.Subscribe(r.Context(), r.Principal.Actor(), person(r), it)
}

func (h *Subscriptions) remove(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	return nil, h.S.Unsubscribe(r.Context(), r.Principal.Actor(), person(r), it)
}
