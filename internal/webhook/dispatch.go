package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Cursor is the dispatcher's row in event_cursors.
const Cursor = "webhooks"

// ItemFinder reads a ticket by id (tracker.Service).
type ItemFinder interface {
	FindItem(ctx context.Context, ref string) (tracker.Item, error)
}

// OrgFinder reads organizations and projects (tenancy.Service).
type OrgFinder interface {
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
	FindProject(ctx context.Context, ref string) (tenancy.Project, error)
}

// Dispatcher is the durable consumer of the event log that turns causes
// into deliveries (a consumer.Consumer named Cursor): for each cause, each
// active hook of the ticket's project or organization that wants it gets a
// delivery row, its event and its job, in the batch that advances the
// cursor. It also tells the admins when a hook was disabled (the
// webhook.disabled events it reads), as in-app notifications.
type Dispatcher struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	Items   ItemFinder
	Orgs    OrgFinder
	Members notify.MemberLister
	// LinkBase is where links point: [notify] base_url (config.LinkBase).
	LinkBase string
	// Mail: mail is configured ([notify.email] smtp_url); the admins who
	// chose mail for webhook.disabled (the default) are then mailed too.
	Mail bool
	// Interval and Batch: the consumer's (consumer.DefaultInterval,
	// DefaultBatch when ≤ 0).
	Interval time.Duration
	Batch    int

	consumer *consumer.Consumer
}

// Init makes the dispatcher ready; call it once before Run, Nudge or
// OnCommit.
func (d *Dispatcher) Init() *Dispatcher {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	disabled := event.TypeOf[WebhookDisabled]()
	d.consumer = (&consumer.Consumer{Name: Cursor, Store: d.Store, Applier: d.Applier, Clock: d.Clock, Log: d.Log, Decide: d.decideBatch,
		Wakes: func(t string) bool { return t == disabled || notify.MayCause(t) }, Interval: d.Interval, Batch: d.Batch}).Init()
	return d
}

// OnCommit is the dispatcher's subscriber (transition.Subscriber): a
// committed event that may be a cause nudges it.
func (d *Dispatcher) OnCommit(c transition.Committed) { d.consumer.OnCommit(c) }

// Run passes at once, then after every nudge and at least every Interval,
// until ctx ends (the leader runs it).
func (d *Dispatcher) Run(ctx context.Context) { d.consumer.Run(ctx) }

// Pass processes the events after the cursor up to the log's head and
// returns how many events it wrote.
func (d *Dispatcher) Pass(ctx context.Context) (int, error) { return d.consumer.Pass(ctx) }

// decideBatch decides the deliveries (and notifications) of a batch of
// events.
func (d *Dispatcher) decideBatch(ctx context.Context, evs []event.Event) (*transition.Transition, error) {
	t := &transition.Transition{}
	now := d.Clock.Now().Truncate(time.Millisecond)
	var notes []notify.Notification
	for _, e := range evs {
		if w, ok, err := event.Decode[WebhookDisabled](e); ok || err != nil {
			if err != nil {
				return nil, err
			}
			ns, err := d.disabled(ctx, e, w)
			if err != nil {
				return nil, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
			}
			notes = append(notes, ns...)
			continue
		}
		part, err := d.decide(ctx, e, now)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
		}
		t.Add(part)
	}
	if len(notes) > 0 {
		nt, err := notify.WriteMailing(ctx, d.Store, notes, d.Mail, d.LinkBase, now)
		if err != nil {
			return nil, err
		}
		t.Add(*nt)
	}
	if len(t.Events) == 0 {
		return nil, nil
	}
	return t, nil
}

// decide returns the deliveries e causes: none when e is no cause, its
// ticket is gone, or no active hook wants it.
func (d *Dispatcher) decide(ctx context.Context, e event.Event, now time.Time) (transition.Transition, error) {
	var t transition.Transition
	c, ok, err := notify.Classify(e)
	if err != nil || !ok {
		return t, err
	}
	itemID := c.ItemID
	if c.FlowID != "" {
		f, err := flow.Read(ctx, d.Store, c.FlowID)
		if apperr.Code(err) == apperr.NotFound {
			return t, nil
		}
		if err != nil {
			return t, err
		}
		itemID = f.ItemID
	}
	it, err := d.Items.FindItem(ctx, itemID)
	if apperr.Code(err) == apperr.NotFound {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	hooks, err := d.hooks(ctx, it.OrganizationID, it.ProjectID, c.Name)
	if err != nil || len(hooks) == 0 {
		return t, err
	}
	org, err := d.Orgs.FindOrganization(ctx, it.OrganizationID)
	if err != nil {
		return t, err
	}
	p, err := d.Orgs.FindProject(ctx, it.ProjectID)
	if err != nil {
		return t, err
	}
	body := Message{Type: c.Name, Timestamp: e.OccurredAt.UTC(), Data: Data{Cause: c.Name, Text: c.Text, Project: p.Key,
		Organization: org.Slug, EventSeq: e.Seq, Ticket: Ticket{Key: it.Key, Title: it.Title, Link: d.LinkBase + notify.Link(it.Key, c.Anchor)}}}.encode()
	for _, h := range hooks {
		id := transition.NewID()
		t.Events = append(t.Events, event.Of(Actor, h.OrganizationID, it.ProjectID, h.ID, DeliveryQueued{Delivery: id, Cause: c.Name,
			Item: it.Key, EventSeq: e.Seq}))
		t.Statements = append(t.Statements, store.Stmt(`INSERT INTO webhook_deliveries (id, webhook_id, organization_id, project_id, cause,
item_key, event_id, event_seq, payload, status, attempts, started_at, next_attempt_at, created_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, 1)`, id, h.ID, h.OrganizationID, it.ProjectID, c.Name, it.Key, e.ID, e.Seq, body,
			now.UnixMilli(), now.UnixMilli(), now.UnixMilli(), now.UnixMilli()))
		t.Jobs = append(t.Jobs, job.New(Deliver{Delivery: id, Attempt: 1}))
	}
	return t, nil
}

// hooks lists the active hooks of the project and of its organization
// that want cause.
func (d *Dispatcher) hooks(ctx context.Context, orgID, projectID, cause string) ([]Webhook, error) {
	rows, err := d.Store.Query(ctx, `SELECT `+hookColumns+` FROM webhooks WHERE organization_id = ? AND project_id IN ('', ?) AND active = 1
ORDER BY created_at, id`, orgID, projectID)
	if err != nil {
		return nil, fmt.Errorf("read webhooks: %w", err)
	}
	var out []Webhook
	for i := range rows.Len() {
		h, err := scanHook(rows, i)
		if err != nil {
			return nil, err
		}
		if h.wants(cause) {
			out = append(out, h)
		}
	}
	return out, nil
}

// disabled returns the notifications of a hook's disabling: one to each
// admin of its project (or organization), linking where they manage it.
func (d *Dispatcher) disabled(ctx context.Context, e event.Event, w WebhookDisabled) ([]notify.Notification, error) {
	admins, err := notify.Admins(ctx, d.Members, e.OrganizationID, e.ProjectID)
	if err != nil {
		return nil, err
	}
	title, link := "A webhook", "/orgs"
	if e.ProjectID != "" {
		p, err := d.Orgs.FindProject(ctx, e.ProjectID)
		if err != nil && apperr.Code(err) != apperr.NotFound {
			return nil, err
		}
		if err == nil {
			link = "/projects/" + p.Key + "/settings"
		}
	}
	rows, err := d.Store.Query(ctx, `SELECT url FROM webhooks WHERE id = ?`, e.EntityID)
	if err != nil {
		return nil, fmt.Errorf("read webhook %s: %w", e.EntityID, err)
	}
	if rows.Len() == 1 {
		var u string
		if err := rows.Scan(0, &u); err != nil {
			return nil, err
		}
		title = "Webhook to " + host(u)
	}
	n := notify.Notification{Cause: notify.CauseWebhookDisabled, OrganizationID: e.OrganizationID, ProjectID: e.ProjectID, Title: title,
		Text: "Its deliveries failed for 24 hours, so it was disabled: " + clip(w.Error), Link: link}
	var out []notify.Notification
	for _, a := range admins {
		out = append(out, notify.To(a, e, n))
	}
	return out, nil
}
