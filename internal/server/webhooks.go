package server

import (
	"net/http"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/webhook"
)

// Webhooks serves the webhooks of organizations and projects: create (the
// signing secret is shown once), list, get, update, delete, and a hook's
// deliveries (listed, redelivered). Project hooks need project.update in
// the project, organization hooks project.update in the organization
// (its admins); another organization's hooks are not found.
type Webhooks struct {
	S *webhook.Service
}

// WebhookCreate is the body of POST …/webhooks.
type WebhookCreate struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Format string   `json:"format,omitempty"` // standard (default) or slack
}

// WebhookUpdate is the body of PATCH …/webhooks/{id}: the fields given
// change (active true re-enables a disabled hook).
type WebhookUpdate struct {
	URL    *string   `json:"url,omitempty"`
	Events *[]string `json:"events,omitempty"`
	Format *string   `json:"format,omitempty"`
	Active *bool     `json:"active,omitempty"`
}

// WebhookList is the body of GET …/webhooks.
type WebhookList struct {
	Webhooks []webhook.Webhook `json:"webhooks"`
}

// Routes returns the webhook endpoints, for both scopes.
func (h *Webhooks) Routes() []*Route {
	var out []*Route
	for _, sc := range []struct {
		base, what string
		scope      func(*Request) (webhook.Scope, error)
	}{
		{"/api/v1/orgs/{org}/webhooks", "an organization's (every project's causes; organization admins)", h.orgScope},
		{"/api/v1/projects/{project}/webhooks", "a project's", h.projectScope},
	} {
		scope := sc.scope
		out = append(out,
			&Route{Method: "POST", Path: sc.base, Perm: access.ProjectUpdate,
				Summary: "Create a webhook, " + sc.what + ": url, events (causes or *), format standard or slack; the signing secret (whsec_…) is shown once",
				Request: WebhookCreate{}, Response: webhook.CreatedWebhook{}, Status: http.StatusCreated,
				Handle: func(r *Request) (any, error) { return h.create(r, scope) }},
			&Route{Method: "GET", Path: sc.base, Perm: access.ProjectUpdate, Summary: "List " + sc.what + " webhooks (never their secrets)",
				Response: WebhookList{}, Handle: func(r *Request) (any, error) { return h.list(r, scope) }},
			&Route{Method: "GET", Path: sc.base + "/{id}", Perm: access.ProjectUpdate, Summary: "Get a webhook",
				Response: webhook.Webhook{}, Handle: func(r *Request) (any, error) { return h.get(r, scope) }},
			&Route{Method: "PATCH", Path: sc.base + "/{id}", Perm: access.ProjectUpdate,
				Summary: "Update a webhook: url, events, format, active (true re-enables a disabled one)",
				Request: WebhookUpdate{}, Response: webhook.Webhook{}, Handle: func(r *Request) (any, error) { return h.update(r, scope) }},
			&Route{Method: "DELETE", Path: sc.base + "/{id}", Perm: access.ProjectUpdate, Summary: "Delete a webhook and its deliveries",
				Status: http.StatusNoContent, Handle: func(r *Request) (any, error) { return nil, h.delete(r, scope) }},
			&Route{Method: "GET", Path: sc.base + "/{id}/deliveries", Perm: access.ProjectUpdate,
				Summary: "A webhook's deliveries, newest first (?before= the next_before of the previous page, ?limit= 1–200): " +
					"status, HTTP code, attempts, duration, times",
				Response: webhook.WebhookDeliveries{}, Handle: func(r *Request) (any, error) { return h.deliveries(r, scope) }},
			&Route{Method: "POST", Path: sc.base + "/{id}/deliveries/{delivery}/redeliver", Perm: access.ProjectUpdate,
				Summary:  "Send a finished delivery again: the same message and webhook-id, with a new 24 hours of retries",
				Response: webhook.WebhookDelivery{}, Status: http.StatusAccepted, Handle: func(r *Request) (any, error) { return h.redeliver(r, scope) }},
		)
	}
	return out
}

func (h *Webhooks) orgScope(r *Request) (webhook.Scope, error) {
	o, err := r.Org()
	return webhook.Scope{OrganizationID: o.ID}, err
}

func (h *Webhooks) projectScope(r *Request) (webhook.Scope, error) {
	p, err := r.Project()
	return webhook.Scope{OrganizationID: p.OrganizationID, ProjectID: p.ID}, err
}

func (h *Webhooks) create(r *Request, scope func(*Request) (webhook.Scope, error)) (any, error) {
	sc, err := scope(r)
	if err != nil {
		return nil, err
	}
	var in WebhookCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Create(r.Context(), r.Principal.Actor(), r.Principal.Subject, sc, webhook.Input(in))
}

func (h *Webhooks) list(r *Request, scope func(*Request) (webhook.Scope, error)) (any, error) {
	sc, err := scope(r)
	if err != nil {
		return nil, err
	}
	hs, err := h.S.List(r.Context(), sc)
	return WebhookList{Webhooks: hs}, err
}

func (h *Webhooks) get(r *Request, scope func(*Request) (webhook.Scope, error)) (any, error) {
	sc, err := scope(r)
	if err != nil {
		return nil, err
	}
	return h.S.Show(r.Context(), sc, r.PathValue("id"))
}

func (h *Webhooks) update(r *Request, scope func(*Request) (webhook.Scope, error)) (any, error) {
	sc, err := scope(r)
	if err != nil {
		return nil, err
	}
	var in WebhookUpdate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Update(r.Context(), r.Principal.Actor(), sc, r.PathValue("id"), webhook.Patch(in))
}

func (h *Webhooks) delete(r *Request, scope func(*Request) (webhook.Scope, error)) error {
	sc, err := scope(r)
	if err != nil {
		return err
	}
	return h.S.Delete(r.Context(), r.Principal.Actor(), sc, r.PathValue("id"))
}

func (h *Webhooks) deliveries(r *Request, scope func(*Request) (webhook.Scope, error)) (any, error) {
	sc, err := scope(r)
	if err != nil {
		return nil, err
	}
	limit, err := r.QueryInt("limit", webhook.DefaultPage, 1, webhook.MaxPage)
	if err != nil {
		return nil, err
	}
	return h.S.Deliveries(r.Context(), sc, r.PathValue("id"), r.URL.Query().Get("before"), int(limit))
}

func (h *Webhooks) redeliver(r *Request, scope func(*Request) (webhook.Scope, error)) (any, error) {
	sc, err := scope(r)
	if err != nil {
		return nil, err
	}
	return h.S.Redeliver(r.Context(), r.Principal.Actor(), sc, r.PathValue("id"), r.PathValue("delivery"))
}
