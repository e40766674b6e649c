// Package notify reaches people (issue 26): a durable consumer of the event
// log (Notifier) turns the events that need a person — an approval or a
// blocking question waiting, a merge left to a human, a flow failed or
// stuck, a budget used up, a ticket done — into notifications for the
// people concerned, and their inbox (Inbox) lists them and marks them read.
//
// The consumer keeps its cursor (the last seq it processed) in the
// database, in event_cursors, and advances it in the same atomic batch as
// the notifications it creates for the events up to there, guarded by the
// old seq (ADR-0016: read, decide in pure code, write one batch). A crash
// before the batch leaves the cursor where it was, and the events are
// decided again; two consumers (two Core instances on rqlite) that read
// the same cursor cannot both commit: the second loses the race and reads
// again. So each cause reaches each recipient exactly once.
package notify

import (
	"time"

	"github.com/ballet/ballet/internal/event"
)

// Causes: what a notification asks of its recipient, or tells them. The
// names are stable (they are stored and are the webhook event names).
const (
	CauseApprovalWaiting = "approval.waiting" // a human stage waits for an approval
	CauseQuestionOpened  = "question.opened"  // a blocking question waits for an answer
	CauseMergeWaiting    = "merge.waiting"    // a pull request waits for a human's review or merge
	CauseFlowStuck       = "flow.stuck"       // the reconciler flagged a flow
	CauseFlowFailed      = "flow.failed"      // a flow failed
	CauseBudgetExhausted = "budget.exhausted" // a flow waits for budget
	CauseTicketDone      = "ticket.done"      // a ticket is done
	CauseRunnerMissing   = "runner.missing"   // no live runner takes a stage's run
	// CauseQuestionEscalated: a blocking question or an approval is still
	// open after [notify] escalate_after; the project's admins are told.
	CauseQuestionEscalated = "question.escalated"
)

// Causes lists every cause.
var Causes = []string{CauseApprovalWaiting, CauseQuestionOpened, CauseMergeWaiting, CauseFlowStuck, CauseFlowFailed,
	CauseBudgetExhausted, CauseTicketDone, CauseRunnerMissing, CauseQuestionEscalated}

// Notification is one in-app notification, as its recipient reads it.
type Notification struct {
	ID             string     `json:"id"`
	Cause          string     `json:"cause"` // one of Causes
	Item           string     `json:"item"`  // the ticket's key
	ItemID         string     `json:"item_id"`
	OrganizationID string     `json:"organization_id"`
	ProjectID      string     `json:"project_id"`
	Title          string     `json:"title"` // the ticket's title when it was created
	Text           string     `json:"text"`  // what happened, in a line
	Link           string     `json:"link"`  // the path of the page where the person acts, e.g. /items/ACME-7#questions
	EventSeq       int64      `json:"event_seq"`
	CreatedAt      time.Time  `json:"created_at"`
	ReadAt         *time.Time `json:"read_at"` // null while unread
	Version        int64      `json:"version"`

	recipient string
	eventID   string
	mail      bool // its recipient wants it mailed now: a delivery and its job go in the same batch
}

// Events are the payload types of the events notify writes.
var Events = []event.Payload{NotificationCreated{}, NotificationRead{}, NotificationSubscribed{}, NotificationUnsubscribed{},
	NotificationMailed{}, NotificationMailFailed{}, NotificationMailSkipped{}, SettingsChanged{}, AddressConfirmed{}, KeyCreated{}}

func (NotificationCreated) EventType() string      { return "notification.created" }
func (NotificationRead) EventType() string         { return "notification.read" }
func (NotificationSubscribed) EventType() string   { return "notification.subscribed" }
func (NotificationUnsubscribed) EventType() string { return "notification.unsubscribed" }

// NotificationCreated is the payload of notification.created: a person
// has a new notification. Notification events belong to no organization
// (a person's notifications are theirs, not a project's stream).
type NotificationCreated struct {
	Recipient string `json:"recipient"`
	Cause     string `json:"cause"`
	Item      string `json:"item"` // the ticket's key
	ItemID    string `json:"item_id"`
	ProjectID string `json:"project_id"`
	Link      string `json:"link"`
	EventSeq  int64  `json:"event_seq"` // the event that caused it
}

// NotificationRead is the payload of notification.read: its recipient
// marked it read.
type NotificationRead struct {
	Recipient string `json:"recipient"`
	Cause     string `json:"cause"`
	Item      string `json:"item"`
}

// Actor is the notifier in the events of the notifications it creates.
var Actor = event.Actor{Kind: event.ActorSystem, Sub: "notify"}

// NotificationSubscribed is the payload of notification.subscribed: a
// person subscribed to a ticket (its entity is the ticket; of no
// organization, as a person's notifications are).
type NotificationSubscribed struct {
	Subscriber string `json:"subscriber"` // the person's subject
	Item       string `json:"item"`       // the ticket's key
	ItemID     string `json:"item_id"`
	ProjectID  string `json:"project_id"`
}

// NotificationUnsubscribed is the payload of notification.unsubscribed: a
// person ended their subscription to a ticket.
type NotificationUnsubscribed NotificationSubscribed
