package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
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
	DefaultInterval = 2 * time.Second
	DefaultBatch    = 500
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
// notifications. Pass and Run may run concurrently, also in other Core
// instances on the same database: the cursor's guard lets one of them
// commit each batch.
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

	wake *clock.Waker
}

// Init makes the notifier ready; call it once before Run, Nudge or
// OnCommit.
func (n *Notifier) Init() *Notifier {
	n.wake = clock.NewWaker()
	if n.Log == nil {
		n.Log = slog.New(slog.DiscardHandler)
	}
	return n
}

// OnCommit is the notifier's subscriber (transition.Subscriber): a
// committed event that may be a cause nudges it.
func (n *Notifier) OnCommit(c transition.Committed) {
	for _, e := range c.Events {
		if causeTypes[e.Type] {
			n.Nudge()
			return
		}
	}
}

// Nudge asks for a pass at once; it never blocks.
func (n *Notifier) Nudge() { n.wake.Nudge() }

// Run passes at once, then after every nudge and at least every
// Interval, until ctx ends (the leader runs it). A pass's error is
// logged; the next pass tries again from the cursor.
func (n *Notifier) Run(ctx context.Context) {
	every := n.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	for {
		if _, err := n.Pass(ctx); err != nil && ctx.Err() == nil {
			n.Log.Error("notifier pass (retried from the cursor)", "err", err)
		}
		if !n.wake.Wait(ctx, n.Clock, every) {
			return
		}
	}
}

// maxRaces bounds how often a pass reads again after losing its batch to
// another consumer before it leaves the rest to the next pass.
const maxRaces = 20

// Pass processes the events after the cursor up to the log's head, batch
// by batch, and returns how many notifications it created. A batch lost to
// another consumer is read again from the fresh cursor.
func (n *Notifier) Pass(ctx context.Context) (created int, err error) {
	races := 0
	for {
		made, more, err := n.batch(ctx)
		switch {
		case errors.Is(err, store.ErrLostRace):
			if races++; races >= maxRaces {
				return created, nil
			}
			continue
		case err != nil:
			return created, err
		}
		created += made
		if !more {
			return created, nil
		}
	}
}

// ReadCursor returns the last seq the notifier processed.
func ReadCursor(ctx context.Context, q store.Store) (int64, error) {
	rows, err := store.One(ctx, q, "the notifier's cursor", `SELECT seq FROM event_cursors WHERE name = ?`, Cursor)
	if err != nil {
		return 0, err
	}
	var seq int64
	return seq, rows.Scan(0, &seq)
}

// batch reads the events after the cursor (at most Batch), decides their
// notifications and writes them with the cursor's advance in one batch.
// more is true when the batch was full.
func (n *Notifier) batch(ctx context.Context) (made int, more bool, err error) {
	size := n.Batch
	if size <= 0 {
		size = DefaultBatch
	}
	from, err := ReadCursor(ctx, n.Store)
	if err != nil {
		return 0, false, err
	}
	evs, err := event.List(ctx, n.Store, event.Filter{AfterSeq: from, Limit: size})
	if err != nil || len(evs) == 0 {
		return 0, false, err
	}
	to := evs[len(evs)-1].Seq
	var out []Notification
	var jobs []job.Spec
	for _, e := range evs {
		ns, js, err := n.decide(ctx, e)
		if err != nil {
			return 0, false, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
		}
		out, jobs = append(out, ns...), append(jobs, js...)
	}
	now := n.Clock.Now().Truncate(time.Millisecond)
	advance := advance(from, to, now)
	if len(out) == 0 {
		// Nothing to tell anyone: the cursor alone moves (bookkeeping of
		// the consumer, as a job's claim is: no event), with the
		// escalation jobs of the waits the events opened.
		stmts := []store.Statement{advance, transition.Guard}
		for _, j := range jobs {
			st, err := j.Insert(transition.NewID(), now)
			if err != nil {
				return 0, false, err
			}
			stmts = append(stmts, st)
		}
		if _, err := n.Store.Exec(ctx, stmts...); err != nil {
			return 0, false, fmt.Errorf("advance the notifier's cursor to %d: %w", to, err)
		}
		return 0, len(evs) == size, nil
	}
	t := write(out, advance, now)
	t.Jobs = jobs
	if err := n.Applier.Apply(ctx, t); err != nil {
		return 0, false, fmt.Errorf("notifications of events %d–%d: %w", from+1, to, err)
	}
	return len(out), len(evs) == size, nil
}

// advance is the statement that moves the cursor from the seq read to
// another; guarded, it loses the race when the cursor moved meanwhile.
func advance(from, to int64, now time.Time) store.Statement {
	return store.Stmt(`UPDATE event_cursors SET seq = ?, updated_at = ? WHERE name = ? AND seq = ?`, to, now.UnixMilli(), Cursor, from)
}

// write is the batch of notifications ns with the cursor's guarded
// advance: an event and a row per notification.
func write(ns []Notification, advance store.Statement, now time.Time) *transition.Transition {
	t := &transition.Transition{Guarded: []store.Statement{advance}}
	for i := range ns {
		x := &ns[i]
		x.ID, x.CreatedAt, x.Version = transition.NewID(), now, 1
		t.Events = append(t.Events, event.Of(Actor, "", "", x.ID, NotificationCreated{Recipient: x.recipient, Cause: x.Cause,
			Item: x.Item, ItemID: x.ItemID, ProjectID: x.ProjectID, Link: x.Link, EventSeq: x.EventSeq}))
		t.Statements = append(t.Statements, store.Stmt(`INSERT INTO notifications (id, recipient, cause, event_id, event_seq, organization_id,
project_id, item_id, item_key, title, text, link, created_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
			x.ID, x.recipient, x.Cause, x.eventID, x.EventSeq, x.OrganizationID, x.ProjectID, x.ItemID, x.Item, x.Title, x.Text, x.Link,
			now.UnixMilli()))
	}
	return t
}

// decide reads what e's cause needs and returns its notifications (none
// when e is no cause, or when its ticket or flow is gone) and the
// escalation job of the wait it opens.
func (n *Notifier) decide(ctx context.Context, e event.Event) ([]Notification, []job.Spec, error) {
	tr, ok, err := classify(e)
	if err != nil || !ok {
		return nil, nil, err
	}
	itemID := tr.itemID
	if tr.flowID != "" {
		f, err := flow.Read(ctx, n.Store, tr.flowID)
		if apperr.Code(err) == apperr.NotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		itemID = f.ItemID
	}
	it, err := n.Items.FindItem(ctx, itemID)
	if apperr.Code(err) == apperr.NotFound {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var jobs []job.Spec
	if tr.escalate != nil {
		j, err := n.escalationJob(ctx, it.ProjectID, *tr.escalate)
		switch {
		case apperr.Code(err) == apperr.NotFound: // no project: nothing to escalate to
		case err != nil:
			return nil, nil, err
		default:
			jobs = append(jobs, j)
		}
	}
	facts, err := n.facts(ctx, tr, it)
	if err != nil {
		return nil, nil, err
	}
	var out []Notification
	for _, r := range recipients(tr, actorPerson(e), facts) {
		ok, err := n.mayRead(ctx, r, it.OrganizationID, it.ProjectID)
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
func (n *Notifier) facts(ctx context.Context, tr trigger, it tracker.Item) (ticketFacts, error) {
	var f ticketFacts
	var err error
	if it.Assignee != nil {
		f.assignee = *it.Assignee
	}
	if f.creator, err = n.person(ctx, it.CreatedBy); err != nil {
		return f, err
	}
	if tr.audience == AudienceAdmins {
		if f.admins, err = n.admins(ctx, it.OrganizationID, it.ProjectID); err != nil {
			return f, err
		}
	}
	if tr.subscribers {
		if f.subscribers, err = subscribers(ctx, n.Store, it.ID); err != nil {
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
