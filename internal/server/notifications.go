package server

import (
	"context"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/notify"
)

// Notifications serves a person's in-app notifications: their inbox,
// marked read one by one or all at once. A person sees only their own,
// and only those of the projects they may read now.
type Notifications struct {
	Inbox *notify.Inbox
	// Settings changes people's notification settings.
	Settings *notify.SettingsService
}

// ReadAll is the answer of marking every notification read.
type ReadAll struct {
	Read int `json:"read"` // how many were marked read
}

// Routes returns the notification endpoints.
func (h *Notifications) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/me/notifications/inbox", Perm: access.Authenticated,
			Summary: "The caller's notifications, newest first, with the unread count (?unread=true for unread ones only, " +
				"?before= the next_before of the previous page, ?limit= 1–200): each names its cause, ticket and the link where the person acts",
			Response: notify.Page{}, Handle: h.list},
		{Method: "POST", Path: "/api/v1/me/notifications/inbox/{id}/read", Perm: access.Authenticated,
			Summary:  "Marks one of the caller's notifications read (idempotent)",
			Response: notify.Notification{}, Handle: h.read},
		{Method: "POST", Path: "/api/v1/me/notifications/inbox/read", Perm: access.Authenticated,
			Summary:  "Marks the caller's unread notifications read (at most 500 a call, oldest first)",
			Response: ReadAll{}, Handle: h.readAll},
		{Method: "GET", Path: "/api/v1/me/notifications", Perm: access.Authenticated,
			Summary: "The caller's notification settings: address (visible only to its owner and platform admins), digest, " +
				"time zone and each cause's choice (mail, inbox or off)",
			Response: notify.Settings{}, Handle: h.settings},
		{Method: "PUT", Path: "/api/v1/me/notifications", Perm: access.Authenticated,
			Summary: "Changes the caller's notification settings (a field left out is unchanged); a new address is mailed a " +
				"confirmation link and gets nothing else until it is opened",
			Request: notify.SettingsUpdate{}, Response: notify.Settings{}, Handle: h.putSettings},
		{Method: "GET", Path: "/api/v1/platform/mail", Perm: access.PlatformAdmin,
			Summary:  "Mail deliveries by status and the latest failure: failing is true while a mail is being retried",
			Response: notify.MailAttention{}, Handle: h.mailAttention},
	}
}

func (h *Notifications) settings(r *Request) (any, error) {
	r.Checked() // the caller's own
	return notify.ReadSettings(r.Context(), h.Settings.Store, person(r))
}

func (h *Notifications) putSettings(r *Request) (any, error) {
	r.Checked() // the caller's own
	var u notify.SettingsUpdate
	if err := r.Decode(&u); err != nil {
		return nil, err
	}
	return h.Settings.Update(r.Context(), r.Principal.Actor(), person(r), u)
}

func (h *Notifications) mailAttention(r *Request) (any, error) {
	return notify.ReadMailAttention(r.Context(), h.Settings.Store)
}

// person is whose notifications a request reads: the human signed in, or
// the human a token acts for.
func person(r *Request) string {
	if r.Principal.ActingFor != "" {
		return r.Principal.ActingFor
	}
	return r.Principal.Subject
}

// readable is the request's check of tracker.read in a project: a
// notification of a project the credential may not read (a token of
// another organization, a member removed since) stays hidden.
func (r *Request) readable() notify.Readable {
	return func(ctx context.Context, orgID, projectID string) (bool, error) {
		err := r.api.access.Check(ctx, r.Principal, access.TrackerRead, orgID, projectID)
		if err == nil {
			return true, nil
		}
		switch apperr.Code(err) {
		case apperr.NotFound, apperr.Forbidden:
			return false, nil
		}
		return false, err
	}
}

func (h *Notifications) list(r *Request) (any, error) {
	r.Checked() // the caller's own, filtered by what it may read
	unread, err := r.QueryBool("unread")
	if err != nil {
		return nil, err
	}
	before, err := r.QueryInt("before", 0, bounds.After.Min, bounds.After.Max)
	if err != nil {
		return nil, err
	}
	limit, err := r.QueryInt("limit", notify.DefaultPage, 1, notify.MaxPage)
	if err != nil {
		return nil, err
	}
	return h.Inbox.List(r.Context(), person(r), r.readable(), notify.Filter{UnreadOnly: unread, Before: before, Limit: int(limit)})
}

func (h *Notifications) read(r *Request) (any, error) {
	r.Checked() // the caller's own: another's is not found
	return h.Inbox.MarkRead(r.Context(), r.Principal.Actor(), person(r), r.readable(), r.PathValue("id"))
}

func (h *Notifications) readAll(r *Request) (any, error) {
	r.Checked() // the caller's own
	n, err := h.Inbox.ReadAll(r.Context(), r.Principal.Actor(), person(r), r.readable())
	return ReadAll{Read: n}, err
}
