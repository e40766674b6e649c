package webhook

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// SecretPrefix starts every signing secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// secretBytes is the length of a signing key (Standard Webhooks: 24 to 64
// bytes).
const secretBytes = 32

// Page sizes of a hook's deliveries.
const (
	DefaultPage = 50
	MaxPage     = 200
)

// Service keeps the hooks of organizations and projects and their
// deliveries.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	// Resolver resolves a URL's host at creation (net.DefaultResolver).
	Resolver Resolver
	// AllowPrivate lets hooks target internal addresses ([notify]
	// allow_private_targets).
	AllowPrivate bool
}

// Scope is where a hook lives: an organization (ProjectID "") or one of
// its projects.
type Scope struct {
	OrganizationID string
	ProjectID      string
}

// Input is a hook's creation.
type Input struct {
	URL    string
	Events []string
	Format string // "" is standard
}

// Patch changes a hook: a nil field stays as it is. Setting Active true
// re-enables a disabled hook.
type Patch struct {
	URL    *string
	Events *[]string
	Format *string
	Active *bool
}

// check validates a hook's fields (CheckURL for url), naming each field.
func (s *Service) check(ctx context.Context, v *apperr.Validator, u *string, events *[]string, format *string) {
	if u != nil {
		v.CheckErr("url", CheckURL(ctx, s.Resolver, *u, s.AllowPrivate))
	}
	if events != nil {
		evs := *events
		v.Check(len(evs) >= 1 && len(evs) <= MaxEvents, "events", "must list 1–%d event names", MaxEvents)
		for i, e := range evs {
			v.Check(slices.Contains(EventNames, e), fmt.Sprintf("events[%d]", i), "%q is not a cause (%v) or *", e, EventNames)
			v.Check(!slices.Contains(evs[:i], e), fmt.Sprintf("events[%d]", i), "%q is listed twice", e)
		}
	}
	if format != nil {
		v.Check(*format == FormatStandard || *format == FormatSlack, "format", "must be standard or slack")
	}
}

// NewSecret returns a new signing secret: whsec_ and 32 random bytes in
// base64.
func NewSecret() (secret string, key []byte) {
	key = make([]byte, secretBytes)
	rand.Read(key) // never fails (crypto/rand, Go 1.24+)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), key
}

// Create adds a hook to the scope and returns it with its signing secret,
// shown this once.
func (s *Service) Create(ctx context.Context, actor event.Actor, createdBy string, sc Scope, in Input) (CreatedWebhook, error) {
	if in.Format == "" {
		in.Format = FormatStandard
	}
	var v apperr.Validator
	s.check(ctx, &v, &in.URL, &in.Events, &in.Format)
	if err := v.Err(); err != nil {
		return CreatedWebhook{}, err
	}
	now := s.Clock.Now().Truncate(time.Millisecond)
	secret, key := NewSecret()
	h := Webhook{ID: transition.NewID(), OrganizationID: sc.OrganizationID, ProjectID: sc.ProjectID, URL: in.URL, Events: in.Events,
		Format: in.Format, Active: true, CreatedBy: createdBy, CreatedAt: now, UpdatedAt: now, Version: 1}
	evs, _ := json.Marshal(h.Events)
	t := &transition.Transition{
		Events: []event.Event{event.Of(actor, h.OrganizationID, h.ProjectID, h.ID, WebhookCreated{Events: h.Events, Format: h.Format, Host: host(h.URL)})},
		Statements: []store.Statement{store.Stmt(`INSERT INTO webhooks (id, organization_id, project_id, url, events, format, active, secret,
created_by, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, 1)`, h.ID, h.OrganizationID, h.ProjectID, h.URL,
			string(evs), h.Format, base64.StdEncoding.EncodeToString(key), h.CreatedBy, now.UnixMilli(), now.UnixMilli())},
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		return CreatedWebhook{}, err
	}
	return CreatedWebhook{Webhook: h, Secret: secret}, nil
}

// host is a URL's host, what events may tell of it.
func host(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

const hookColumns = `id, organization_id, project_id, url, events, format, active, COALESCE(disabled_at, 0), created_by, created_at, updated_at, version`

func scanHook(rows *store.Rows, i int) (Webhook, error) {
	var h Webhook
	var evs string
	var disabled, created, updated int64
	if err := rows.Scan(i, &h.ID, &h.OrganizationID, &h.ProjectID, &h.URL, &evs, &h.Format, &h.Active, &disabled, &h.CreatedBy,
		&created, &updated, &h.Version); err != nil {
		return h, err
	}
	if err := json.Unmarshal([]byte(evs), &h.Events); err != nil {
		return h, fmt.Errorf("webhook %s: events: %w", h.ID, err)
	}
	h.DisabledAt, h.CreatedAt, h.UpdatedAt = store.OptionalTime(disabled), store.Time(created), store.Time(updated)
	return h, nil
}

// List returns the scope's own hooks, oldest first (an organization's list
// holds its organization-wide hooks, not its projects').
func (s *Service) List(ctx context.Context, sc Scope) ([]Webhook, error) {
	rows, err := s.Store.Query(ctx, `SELECT `+hookColumns+` FROM webhooks WHERE organization_id = ? AND project_id = ? ORDER BY created_at, id`,
		sc.OrganizationID, sc.ProjectID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	out := make([]Webhook, 0, rows.Len())
	for i := range rows.Len() {
		h, err := scanHook(rows, i)
		if err != nil {
			return nil, err
		}
		if err := health(ctx, s.Store, &h); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// Show is Get with the hook's health (failing, last_error,
// failing_since), as its admins read it.
func (s *Service) Show(ctx context.Context, sc Scope, id string) (Webhook, error) {
	h, err := s.Get(ctx, sc, id)
	if err != nil {
		return h, err
	}
	return h, health(ctx, s.Store, &h)
}

// health fills in whether h is failing: a delivery pending after a failed
// attempt (being retried), or h disabled by 24 hours of failure.
func health(ctx context.Context, st store.Store, h *Webhook) error {
	rows, err := st.Query(ctx, `SELECT COUNT(*), COALESCE(MIN(started_at), 0) FROM webhook_deliveries
WHERE webhook_id = ? AND status = 'pending' AND attempts > 0`, h.ID)
	if err != nil {
		return fmt.Errorf("webhook %s: read its failing deliveries: %w", h.ID, err)
	}
	var retrying, since int64
	if err := rows.Scan(0, &retrying, &since); err != nil {
		return err
	}
	if retrying == 0 && h.DisabledAt == nil {
		return nil
	}
	h.Failing = true
	// The latest failed attempt: of a delivery being retried, or, disabled,
	// of the one that gave up.
	rows, err = st.Query(ctx, `SELECT error, started_at, status FROM webhook_deliveries
WHERE webhook_id = ? AND error IS NOT NULL AND status IN ('pending', 'failed') ORDER BY last_attempt_at DESC, id DESC LIMIT 1`, h.ID)
	if err != nil {
		return fmt.Errorf("webhook %s: read its last error: %w", h.ID, err)
	}
	if rows.Len() == 1 {
		var msg, status string
		var started int64
		if err := rows.Scan(0, &msg, &started, &status); err != nil {
			return err
		}
		h.LastError = &msg
		if retrying == 0 && status == StatusFailed {
			since = started
		}
	}
	switch {
	case since > 0:
		t := store.Time(since)
		h.FailingSince = &t
	default:
		h.FailingSince = h.DisabledAt
	}
	return nil
}

// Get returns the scope's hook id; another scope's is not found.
func (s *Service) Get(ctx context.Context, sc Scope, id string) (Webhook, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("webhook %q", id), `SELECT `+hookColumns+` FROM webhooks
WHERE id = ? AND organization_id = ? AND project_id = ?`, id, sc.OrganizationID, sc.ProjectID)
	if err != nil {
		return Webhook{}, err
	}
	return scanHook(rows, 0)
}

// Update changes the scope's hook id as p says (a patch that changes
// nothing records nothing).
func (s *Service) Update(ctx context.Context, actor event.Actor, sc Scope, id string, p Patch) (Webhook, error) {
	var v apperr.Validator
	s.check(ctx, &v, p.URL, p.Events, p.Format)
	if err := v.Err(); err != nil {
		return Webhook{}, err
	}
	var out Webhook
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		h, err := s.Get(ctx, sc, id)
		if err != nil {
			return nil, err
		}
		next, changed := patch(h, p)
		out = next
		if len(changed) == 0 {
			return nil, nil
		}
		now := s.Clock.Now().Truncate(time.Millisecond)
		next.UpdatedAt, next.Version = now, h.Version+1
		if next.Active && !h.Active {
			next.DisabledAt = nil // re-enabled
		}
		out = next
		evs, _ := json.Marshal(next.Events)
		var disabled any
		if next.DisabledAt != nil {
			disabled = next.DisabledAt.UnixMilli()
		}
		return &transition.Transition{
			Events: []event.Event{event.Of(actor, h.OrganizationID, h.ProjectID, h.ID, WebhookUpdated{Changed: changed, Active: next.Active})},
			Guarded: []store.Statement{store.Stmt(`UPDATE webhooks SET url = ?, events = ?, format = ?, active = ?, disabled_at = ?, updated_at = ?,
version = version + 1 WHERE id = ? AND version = ?`, next.URL, string(evs), next.Format, next.Active, disabled, now.UnixMilli(), h.ID, h.Version)},
		}, nil
	})
	return out, err
}

// patch applies p to h (pure) and names the fields it changed.
func patch(h Webhook, p Patch) (Webhook, []string) {
	var changed []string
	if p.URL != nil && *p.URL != h.URL {
		h.URL, changed = *p.URL, append(changed, "url")
	}
	if p.Events != nil && !slices.Equal(*p.Events, h.Events) {
		h.Events, changed = slices.Clone(*p.Events), append(changed, "events")
	}
	if p.Format != nil && *p.Format != h.Format {
		h.Format, changed = *p.Format, append(changed, "format")
	}
	if p.Active != nil && *p.Active != h.Active {
		h.Active, changed = *p.Active, append(changed, "active")
	}
	return h, changed
}

// Delete removes the scope's hook id and its deliveries; a delivery's
// pending job then finds nothing to send.
func (s *Service) Delete(ctx context.Context, actor event.Actor, sc Scope, id string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		h, err := s.Get(ctx, sc, id)
		if err != nil {
			return nil, err
		}
		return &transition.Transition{
			Events:     []event.Event{event.Of(actor, h.OrganizationID, h.ProjectID, h.ID, WebhookDeleted{})},
			Guarded:    []store.Statement{store.Stmt(`DELETE FROM webhooks WHERE id = ? AND version = ?`, h.ID, h.Version)},
			Statements: []store.Statement{store.Stmt(`DELETE FROM webhook_deliveries WHERE webhook_id = ?`, h.ID)},
		}, nil
	})
	return err
}

const deliveryColumns = `id, webhook_id, cause, item_key, event_seq, status, attempts, http_status, duration_ms, COALESCE(error, ''),
COALESCE(last_attempt_at, 0), COALESCE(next_attempt_at, 0), created_at, updated_at, version`

func scanDelivery(rows *store.Rows, i int) (WebhookDelivery, error) {
	var d WebhookDelivery
	var code, dur sql.NullInt64
	var last, next, created, updated int64
	if err := rows.Scan(i, &d.ID, &d.WebhookID, &d.Cause, &d.Item, &d.EventSeq, &d.Status, &d.Attempts, &code, &dur, &d.Error,
		&last, &next, &created, &updated, &d.Version); err != nil {
		return d, err
	}
	if code.Valid {
		x := int(code.Int64)
		d.HTTPStatus = &x
	}
	if dur.Valid {
		d.DurationMS = &dur.Int64
	}
	d.LastAttemptAt, d.NextAttemptAt = store.OptionalTime(last), store.OptionalTime(next)
	d.CreatedAt, d.UpdatedAt = store.Time(created), store.Time(updated)
	return d, nil
}

// Deliveries returns a page of the scope's hook's deliveries, newest
// first: before is the next_before of the previous page ("": the first).
func (s *Service) Deliveries(ctx context.Context, sc Scope, hookID, before string, limit int) (WebhookDeliveries, error) {
	if _, err := s.Get(ctx, sc, hookID); err != nil {
		return WebhookDeliveries{}, err
	}
	where, args := `webhook_id = ?`, []any{hookID}
	if before != "" {
		where, args = where+` AND id < ?`, append(args, before)
	}
	rows, err := s.Store.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE `+where+` ORDER BY id DESC LIMIT ?`,
		append(args, limit+1)...)
	if err != nil {
		return WebhookDeliveries{}, fmt.Errorf("list deliveries: %w", err)
	}
	page := WebhookDeliveries{Deliveries: []WebhookDelivery{}}
	for i := range min(rows.Len(), limit) {
		d, err := scanDelivery(rows, i)
		if err != nil {
			return page, err
		}
		page.Deliveries = append(page.Deliveries, d)
	}
	if rows.Len() > limit {
		page.NextBefore = &page.Deliveries[limit-1].ID
	}
	return page, nil
}

// delivery reads the hook's delivery id.
func (s *Service) delivery(ctx context.Context, hookID, id string) (WebhookDelivery, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("delivery %q", id), `SELECT `+deliveryColumns+` FROM webhook_deliveries
WHERE id = ? AND webhook_id = ?`, id, hookID)
	if err != nil {
		return WebhookDelivery{}, err
	}
	return scanDelivery(rows, 0)
}

// Redeliver sends a finished delivery of the scope's hook again: the same
// message under the same webhook-id, with a new 24 hours of attempts. A
// delivery still pending, or a hook that is not active, is a conflict.
func (s *Service) Redeliver(ctx context.Context, actor event.Actor, sc Scope, hookID, id string) (WebhookDelivery, error) {
	var out WebhookDelivery
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		h, err := s.Get(ctx, sc, hookID)
		if err != nil {
			return nil, err
		}
		d, err := s.delivery(ctx, hookID, id)
		if err != nil {
			return nil, err
		}
		switch {
		case !h.Active:
			return nil, apperr.New(apperr.Conflict, "webhook %s is not active: enable it first (PATCH active: true)", h.ID)
		case d.Status == StatusPending:
			return nil, apperr.New(apperr.Conflict, "delivery %s is still being delivered", d.ID)
		}
		now := s.Clock.Now().Truncate(time.Millisecond)
		d.Status, d.NextAttemptAt, d.UpdatedAt, d.Version = StatusPending, &now, now, d.Version+1
		out = d
		return &transition.Transition{
			Events: []event.Event{event.Of(actor, h.OrganizationID, h.ProjectID, h.ID, DeliveryQueued{Delivery: d.ID, Cause: d.Cause,
				Item: d.Item, EventSeq: d.EventSeq, Redeliver: true})},
			Guarded: []store.Statement{store.Stmt(`UPDATE webhook_deliveries SET status = 'pending', started_at = ?, next_attempt_at = ?,
updated_at = ?, version = version + 1 WHERE id = ? AND version = ?`, now.UnixMilli(), now.UnixMilli(), now.UnixMilli(), d.ID, d.Version-1)},
			Jobs: []job.Spec{job.New(Deliver{Delivery: d.ID, Attempt: d.Attempts + 1})},
		}, nil
	})
	return out, err
}
