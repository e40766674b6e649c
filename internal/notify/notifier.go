package notify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Cursor is the notifier's row in event_cursors.
const Cursor = "notify"

// Defaults of the notifier's knobs.
const (
	DefaultInterval = consumer.DefaultInterval
	DefaultBatch    = consumer.DefaultBatch
)

// ItemFinder reads a ticket by id (tracker.Service).
type ItemFinder interface {
	FindItem(ctx context.Context, ref string) (tracker.Item, error)
}

// MemberLister lists an organization's members or a project's overrides
// (tenancy.Service).
type MemberLister interface {
	ListMembers(ctx context.Context, orgID, projectID string) ([]tenancy.Member, error)
}

// RoleReader reads a person's current role in a project
// (access.Resolver).
type RoleReader interface {
	SubjectRole(ctx context.Context, subject, orgID, projectID string) (string, error)
}

// Notifier is the durable consumer of the event log that creates
// notifications (a consumer.Consumer named Cursor). Pass and Run may run
// concurrently, also in other Core instances on the same database: the
// cursor's guard lets one of them commit each batch.
type Notifier struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	Items   ItemFinder
	Members MemberLister
	Roles   RoleReader
	// PlatformAdmin tells whether a person is a platform admin, who may
	// read every project (auth.Authenticator.IsPlatformAdmin).
	PlatformAdmin func(subject string) bool
	// Interval between passes without a nudge (DefaultInterval when ≤ 0):
	// the events another instance wrote are found then.
	Interval time.Duration
	// Batch is how many events one batch decides (DefaultBatch when ≤ 0).
	Batch int
	// Questions and Projects are read by the escalation job: the question
	// still open, the project's escalate_after now.
	Questions QuestionFinder
	Projects  ProjectFinder
	// EscalateAfter is [notify] escalate_after, the platform's
	// (DefaultEscalateAfter when ≤ 0); a project may set its own.
	EscalateAfter time.Duration
	// Mail: mail is configured ([notify.email] smtp_url). Then a
	// notification whose recipient wants its cause mailed and has a
	// confirmed address gets a delivery (mail_deliveries) and its job
	// notify.mail in the same batch: decided once, like the notification.
	Mail bool
	// BaseURL is [notify] base_url (its host is the right side of the
	// mails' Message-IDs).
	BaseURL string

	consumer *consumer.Consumer
}

// Init makes the notifier ready; call it once before Run, Nudge or
// OnCommit.
func (n *Notifier) Init() *Notifier {
	if n.Log == nil {
		n.Log = slog.New(slog.DiscardHandler)
	}
	n.consumer = (&consumer.Consumer{Name: Cursor, Store: n.Store, Applier: n.Applier, Clock: n.Clock, Log: n.Log,
		Decide: n.decideBatch, Wakes: func(t string) bool { return causeTypes[t] }, Interval: n.Interval, Batch: n.Batch}).Init()
	return n
}

// OnCommit is the notifier's subscriber (transition.Subscriber): a
// committed event that may be a cause nudges it.
func (n *Notifier) OnCommit(c transition.Committed) { n.consumer.OnCommit(c) }

// Nudge asks for a pass at once; it never blocks.
func (n *Notifier) Nudge() { n.consumer.Nudge() }

// Run passes at once, then after every nudge and at least every
// Interval, until ctx ends (the leader runs it). A pass's error is
// logged; the next pass tries again from the cursor.
func (n *Notifier) Run(ctx context.Context) { n.consumer.Run(ctx) }

// Pass processes the events after the cursor up to the log's head, batch
// by batch, and returns how many notifications it created. A batch lost to
// another consumer is read again from the fresh cursor.
func (n *Notifier) Pass(ctx context.Context) (created int, err error) { return n.consumer.Pass(ctx) }

// ReadCursor returns the last seq the notifier processed.
func ReadCursor(ctx context.Context, s store.Store) (int64, error) {
	return consumer.Cursor(ctx, s, Cursor, time.Time{})
}

// decideBatch decides the notifications of a batch of events: a
// notification.created event and a row for each.
func (n *Notifier) decideBatch(ctx context.Context, evs []event.Event) (*transition.Transition, error) {
	var out []Notification
	var jobs []job.Spec
	reads := n.newBatchReads()
	for _, e := range evs {
		ns, js, err := n.decide(ctx, reads, e)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
		}
		out, jobs = append(out, ns...), append(jobs, js...)
	}
	if len(out) == 0 {
		// Nothing to tell anyone: the consumer writes the escalation
		// jobs of the waits the events opened with its cursor, if any.
		return &transition.Transition{Jobs: jobs}, nil
	}
	if n.Mail {
		if err := n.markMail(ctx, reads, out); err != nil {
			return nil, err
		}
	}
	t := write(out, Host(n.BaseURL), n.Clock.Now().Truncate(time.Millisecond))
	t.Jobs = append(t.Jobs, jobs...)
	return t, nil
}

// markMail marks the notifications whose recipient wants their cause
// mailed at once and has a confirmed address.
func (n *Notifier) markMail(ctx context.Context, reads *batchReads, ns []Notification) error {
	for i := range ns {
		s, err := reads.personSettings(ctx, ns[i].recipient)
		if err != nil {
			return err
		}
		ns[i].mail = s.MailTo(ns[i].Cause) != ""
	}
	return nil
}

// write is the batch of notifications ns (the consumer adds the cursor's
// guarded advance): an event and a row per notification, and a delivery
// row and its job per notification to mail (host: the right side of the
// Message-IDs).
func write(ns []Notification, host string, now time.Time) *transition.Transition {
	t := &transition.Transition{}
	for i := range ns {
		x := &ns[i]
		x.ID, x.CreatedAt, x.Version = transition.NewID(), now, 1
		t.Events = append(t.Events, event.Of(Actor, "", "", x.ID, NotificationCreated{Recipient: x.recipient, Cause: x.Cause,
			Item: x.Item, ItemID: x.ItemID, ProjectID: x.ProjectID, Link: x.Link, EventSeq: x.EventSeq}))
		t.Statements = append(t.Statements, store.Stmt(`INSERT INTO notifications (id, recipient, cause, event_id, event_seq, organization_id,
project_id, item_id, item_key, title, text, link, created_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
			x.ID, x.recipient, x.Cause, x.eventID, x.EventSeq, x.OrganizationID, x.ProjectID, x.ItemID, x.Item, x.Title, x.Text, x.Link,
			now.UnixMilli()))
		if x.mail {
			st, j := deliveryWrite(*x, host, now)
			t.Statements, t.Jobs = append(t.Statements, st), append(t.Jobs, j)
		}
	}
	return t
}

// decide reads what e's cause needs and returns its notifications (none
// when e is no cause, or when its ticket or flow is gone) and the
// escalation job of the wait it opens. reads are the batch's reads.
func (n *Notifier) decide(ctx context.Context, reads *batchReads, e event.Event) ([]Notification, []job.Spec, error) {
	tr, ok, err := classify(e)
	if err != nil || !ok {
		return nil, nil, err
	}
	itemID := tr.itemID
	if tr.flowID != "" {
		f, err := reads.flow(ctx, tr.flowID)
		if apperr.Code(err) == apperr.NotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		itemID = f.ItemID
	}
	it, err := reads.item(ctx, itemID)
	if apperr.Code(err) == apperr.NotFound {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var jobs []job.Spec
	if tr.escalate != nil {
		after, err := reads.escalateAfter(ctx, it.ProjectID)
		switch {
		case apperr.Code(err) == apperr.NotFound: // no project: nothing to escalate to
		case err != nil:
			return nil, nil, err
		default:
			jobs = append(jobs, escalationJob(after, *tr.escalate))
		}
	}
	facts, err := reads.facts(ctx, tr, it)
	if err != nil {
		return nil, nil, err
	}
	var out []Notification
	for _, r := range recipients(tr, actorPerson(e), facts) {
		ok, err := reads.may(ctx, r, it.OrganizationID, it.ProjectID)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue // no longer a member: nothing they could not read in the UI
		}
		out = append(out, Notification{Cause: tr.cause, Item: it.Key, ItemID: it.ID, OrganizationID: it.OrganizationID,
			ProjectID: it.ProjectID, Title: it.Title, Text: tr.text, Link: link(it.Key, tr.anchor), EventSeq: e.Seq,
			recipient: r, eventID: e.ID})
	}
	return out, jobs, nil
}

// facts reads the people a trigger's audience of the ticket is made of.
func (r *batchReads) facts(ctx context.Context, tr trigger, it tracker.Item) (ticketFacts, error) {
	var f ticketFacts
	var err error
	if it.Assignee != nil {
		f.assignee = *it.Assignee
	}
	if f.creator, err = r.person(ctx, it.CreatedBy); err != nil {
		return f, err
	}
	if tr.audience == AudienceAdmins {
		if f.admins, err = r.projectAdmins(ctx, it.OrganizationID, it.ProjectID); err != nil {
			return f, err
		}
	}
	if tr.subscribers {
		if f.subscribers, err = r.itemSubscribers(ctx, it.ID); err != nil {
			return f, err
		}
	}
	return f, nil
}

// person is the person behind a recorded actor subject: an API token's
// creator for "token:<id>", nobody for an agent session's "run:<id>", the
// subject itself otherwise.
func (n *Notifier) person(ctx context.Context, subject string) (string, error) {
	switch {
	case strings.HasPrefix(subject, "run:"):
		return "", nil
	case strings.HasPrefix(subject, "token:"):
		t, found, err := auth.ReadToken(ctx, n.Store, strings.TrimPrefix(subject, "token:"))
		if err != nil || !found {
			return "", err
		}
		if t.ActingFor != "" {
			return t.ActingFor, nil
		}
		return t.CreatedBy, nil
	}
	return subject, nil
}

// admins lists the project's admins: the organization's admins without a
// lower override in the project, and the project's admin overrides.
func (n *Notifier) admins(ctx context.Context, orgID, projectID string) ([]string, error) {
	org, err := n.Members.ListMembers(ctx, orgID, "")
	if err != nil {
		return nil, err
	}
	over, err := n.Members.ListMembers(ctx, orgID, projectID)
	if err != nil {
		return nil, err
	}
	role := map[string]string{}
	for _, m := range org {
		role[m.Subject] = m.Role
	}
	for _, m := range over {
		role[m.Subject] = m.Role
	}
	var out []string
	for s, r := range role {
		if r == access.Admin {
			out = append(out, s)
		}
	}
	return out, nil
}

// mayRead re-checks a recipient against their current role: a person may
// receive what they may read in the project (tracker.read), or anything
// as a platform admin.
func (n *Notifier) mayRead(ctx context.Context, subject, orgID, projectID string) (bool, error) {
	if n.PlatformAdmin != nil && n.PlatformAdmin(subject) {
		return true, nil
	}
	role, err := n.Roles.SubjectRole(ctx, subject, orgID, projectID)
	if err != nil {
		return false, err
	}
	return access.Grants(role, access.TrackerRead), nil
}
