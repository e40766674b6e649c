// Package digest builds and mails the digest (issue 26): per person and
// per period, what needs them now (oldest wait first), what finished
// (tickets done, pull requests merged), what failed or got stuck, and the
// spend against budget of each project they may read — built from the
// events since their last digest, and mailed only when something happened.
//
// The Digester is a leader loop on the injected clock. When a person's
// period closes (Boundary: every [digest] every, weekly, or an hour of
// their day in their time zone) it reads, decides in pure code (Due,
// decide) and writes one batch per person: the digests row — unique on
// the person and the period, and inserted only while the person's latest
// digest is the one read, so two digesters, or one before and after a
// restart, write it once — its event and, when something happened, the
// job that mails it (SendArgs). The job re-reads the digest, renders its
// text and HTML, sends it through a Mailer and records the outcome with an
// event. A period crossed while Core was down makes one digest covering
// everything since the last one.
package digest

import (
	"time"

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
)

// Digest is a person's digest: what needs them now, and what happened in
// the projects they may read in the events after FromSeq up to ToSeq.
type Digest struct {
	Subject  string    `json:"subject"`  // the mail's subject line
	FromSeq  int64     `json:"from_seq"` // the events after this seq …
	ToSeq    int64     `json:"to_seq"`   // … up to this one
	Since    time.Time `json:"since"`    // the start of the period (spend is counted from here)
	At       time.Time `json:"at"`       // when it was built
	Needs    int       `json:"needs"`    // how many things need the person now
	Finished int       `json:"finished"` // tickets done and pull requests merged
	Failures int       `json:"failures"` // flows failed or stuck
	// NeedsTruncated: more things need the person than the digest lists.
	NeedsTruncated bool `json:"needs_truncated"`
	// Empty: nothing needs the person, finished or failed; such a digest is
	// not mailed.
	Empty bool `json:"empty"`
	// Channels are the failing delivery channels the person administers
	// (mail for a platform admin, a webhook of their organization or
	// project), oldest failure first: counted in Needs.
	Channels []DigestChannel `json:"channels"`
	Projects []DigestProject `json:"projects"` // the oldest wait first, then by organization and key
	// NextAt is when the person's next digest closes (GET /api/v1/me/digest
	// only; null when they get none: their choice is off, they have no
	// confirmed address, or the digest is off platform-wide).
	NextAt *time.Time `json:"next_at"`
}

// DigestProject is one project's part of a digest.
type DigestProject struct {
	Org      string           `json:"org"`     // the organization's slug
	Project  string           `json:"project"` // the project's key
	Name     string           `json:"name"`
	Link     string           `json:"link"` // the project's board
	Needs    []DigestNeed     `json:"needs"`
	Finished []DigestFinished `json:"finished"`
	Failures []DigestFailure  `json:"failures"`
	Spend    DigestSpend      `json:"spend"`
}

// DigestNeed is one thing waiting for the person (needsme's kinds).
type DigestNeed struct {
	Kind   string    `json:"kind"` // question, approval, review, merge, stuck, no_runner, budget, pause
	Item   string    `json:"item"` // the ticket's key
	Title  string    `json:"title"`
	Since  time.Time `json:"since"`
	Detail string    `json:"detail"`
	Link   string    `json:"link"` // where the person acts
}

// DigestChannel is a failing delivery channel (needsme's kinds
// mail_failing and webhook_failing): no ticket is concerned.
type DigestChannel struct {
	Kind    string    `json:"kind"`              // mail_failing or webhook_failing
	Org     string    `json:"org,omitempty"`     // the hook's organization (webhook_failing)
	Project string    `json:"project,omitempty"` // the hook's project ("" for an organization's hook)
	Webhook string    `json:"webhook,omitempty"` // the hook's id (webhook_failing)
	Title   string    `json:"title"`
	Since   time.Time `json:"since"`
	Detail  string    `json:"detail"`
	Link    string    `json:"link"` // where the admin acts: the platform's mail status, the hook's settings
}

// Kinds of Finished.
const (
	FinishedTicket = "ticket_done"         // a ticket reached done
	FinishedMerge  = "pull_request_merged" // a merge stage saw its pull request merged
)

// DigestFinished is a ticket done or a pull request merged in the period.
type DigestFinished struct {
	Kind        string    `json:"kind"` // ticket_done or pull_request_merged
	Item        string    `json:"item"`
	Title       string    `json:"title"`
	At          time.Time `json:"at"`
	Link        string    `json:"link"`
	PullRequest string    `json:"pull_request,omitempty"` // the pull request's page, when the forge has one
}

// Kinds of Failure.
const (
	FailureFailed = "flow_failed" // a flow failed
	FailureStuck  = "flow_stuck"  // the reconciler flagged a flow stuck
)

// DigestFailure is a flow that failed or got stuck in the period.
type DigestFailure struct {
	Kind   string    `json:"kind"` // flow_failed or flow_stuck
	Item   string    `json:"item"`
	Title  string    `json:"title"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	Link   string    `json:"link"`
}

// DigestSpend is a project's spend against its daily budget.
type DigestSpend struct {
	Today  budget.Spent    `json:"today_usd"`   // in the budget day that contains the digest's time
	PerDay *budget.Dollars `json:"per_day_usd"` // the daily budget (null: none)
	Period budget.Spent    `json:"period_usd"`  // since the start of the period
	Runs   int64           `json:"runs"`        // runs finished in the period
}

// Events are the payload types of the events digest writes.
var Events = []event.Payload{DigestCreated{}, DigestSent{}, DigestFailed{}}

func (DigestCreated) EventType() string { return "digest.created" }
func (DigestSent) EventType() string    { return "digest.sent" }
func (DigestFailed) EventType() string  { return "digest.failed" }

// DigestCreated is the payload of digest.created: a person's period
// closed. Status pending: a job mails it; empty: nothing happened, nothing
// is mailed. Digest events belong to no organization (a person's digest
// spans theirs).
type DigestCreated struct {
	Recipient string `json:"recipient"`
	Period    string `json:"period"` // the boundary that closed it, RFC 3339
	FromSeq   int64  `json:"from_seq"`
	ToSeq     int64  `json:"to_seq"`
	Status    string `json:"status"` // pending or empty
	Needs     int    `json:"needs"`
	Finished  int    `json:"finished"`
	Failures  int    `json:"failures"`
}

// DigestSent is the payload of digest.sent: the mail server accepted it.
type DigestSent struct {
	Recipient string `json:"recipient"`
	Period    string `json:"period"`
}

// DigestFailed is the payload of digest.failed: it was not mailed — no
// confirmed address (skipped), or the mail server refused it until the
// job gave up (failed).
type DigestFailed struct {
	Recipient string `json:"recipient"`
	Period    string `json:"period"`
	Status    string `json:"status"` // skipped or failed
	Error     string `json:"error"`
}

// Statuses of a digest row.
const (
	StatusPending = "pending"
	StatusSent    = "sent"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
	StatusEmpty   = "empty"
)

// Actor is the digester in the events it writes.
var Actor = event.Actor{Kind: event.ActorSystem, Sub: "digest"}
