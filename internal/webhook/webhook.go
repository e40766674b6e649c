// Package webhook delivers the causes that need a person (internal/notify's
// causes: an approval waiting, a blocking question, a merge left to a
// human, a flow stuck or failed, …) to the HTTP endpoints an organization
// or a project subscribed (docs/notifications.md "Webhooks").
//
// A hook is a URL, the causes it wants and a format: "standard" (the
// Standard Webhooks specification: webhook-id, webhook-timestamp and an
// HMAC-SHA256 webhook-signature under the hook's whsec_ secret, shown once
// at creation) or "slack" (a Slack-compatible {text, blocks} message). The
// Dispatcher is a durable consumer of the event log (internal/consumer,
// named "webhooks"): for each cause and each active hook that wants it, it
// writes a delivery row and its job in the batch that advances its cursor,
// so each message is decided exactly once across restarts and Core
// instances. The job posts it (Deliverer): a 2xx answer succeeds; anything
// else, a timeout or a refused connection is retried with exponential
// backoff for 24 hours, after which the hook is disabled and the admins of
// its project or organization are notified.
//
// Server-side request forgery is the main risk of a webhook: a URL is
// refused at creation when it names or resolves to a loopback, private,
// link-local, metadata or otherwise internal address (CheckURL), and the
// delivery's dialer refuses such an address at connect time, after
// resolution (Control), so a name rebound to an internal address later does
// not pass; no redirect is followed, answers are read up to a bound, and
// each attempt has a short timeout. A platform admin may allow internal
// targets ([notify] allow_private_targets) for on-premises receivers and
// tests.
package webhook

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/notify"
)

// Formats of a hook's messages.
const (
	FormatStandard = "standard" // Standard Webhooks: JSON {type, timestamp, data}, signed
	FormatSlack    = "slack"    // a Slack incoming-webhook message {text, blocks}
)

// All is the event name of a hook that wants every cause.
const All = "*"

// EventNames are the names a hook may subscribe to: every cause, and All.
var EventNames = append(slices.Clone(notify.Causes), All)

// MaxEvents bounds how many names a hook's events list.
const MaxEvents = 16

// Delivery statuses.
const (
	StatusPending   = "pending"   // being delivered, or waiting for its next attempt
	StatusSucceeded = "succeeded" // a 2xx answer
	StatusFailed    = "failed"    // failed for 24 hours: given up (the hook was disabled)
	StatusSkipped   = "skipped"   // the hook was inactive or deleted when its turn came
)

// Webhook is a webhook as its admins read it. Its signing secret is never
// part of it: it is shown once, in CreatedWebhook.
type Webhook struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	// ProjectID is "" for an organization's hook (every project's causes).
	ProjectID string   `json:"project_id"`
	URL       string   `json:"url"`
	Events    []string `json:"events"` // causes, or ["*"]
	Format    string   `json:"format"` // standard or slack
	Active    bool     `json:"active"`
	// DisabledAt is when 24 hours of failed deliveries disabled the hook
	// (null: never, or re-enabled since).
	DisabledAt *time.Time `json:"disabled_at"`
	// Failing is true while a delivery of the hook is being retried after
	// a failed attempt, or while 24 hours of failure keep it disabled.
	Failing bool `json:"failing"`
	// LastError is the latest failed attempt's error, without the URL
	// (null while not failing).
	LastError *string `json:"last_error"`
	// FailingSince is when the oldest delivery still failing began, or,
	// disabled, when the delivery that disabled it began (null while not
	// failing).
	FailingSince *time.Time `json:"failing_since"`
	CreatedBy    string     `json:"created_by"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	Version      int64      `json:"version"`
}

// CreatedWebhook is the answer of a hook's creation: the hook and its signing
// secret, shown this once.
type CreatedWebhook struct {
	Webhook
	// Secret is the Standard Webhooks signing secret: "whsec_" and the
	// key's bytes in base64. Keep it: it is never shown again.
	Secret string `json:"secret"`
}

// wants tells whether the hook wants cause.
func (h Webhook) wants(cause string) bool {
	return slices.Contains(h.Events, All) || slices.Contains(h.Events, cause)
}

// WebhookDelivery is one message to one hook, as its admins read it: no URL, no
// secret, no signature.
type WebhookDelivery struct {
	ID        string `json:"id"` // also the message's webhook-id
	WebhookID string `json:"webhook_id"`
	Cause     string `json:"cause"`
	Item      string `json:"item"` // the ticket's key
	EventSeq  int64  `json:"event_seq"`
	Status    string `json:"status"` // pending, succeeded, failed or skipped
	Attempts  int    `json:"attempts"`
	// HTTPStatus is the last attempt's answer (null: none yet, or no
	// answer: a timeout, a refused connection).
	HTTPStatus    *int       `json:"http_status"`
	DurationMS    *int64     `json:"duration_ms"` // the last attempt's
	Error         string     `json:"error"`       // the last failure ("" when none)
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	Version       int64      `json:"version"`
}

// WebhookDeliveries is a page of a hook's deliveries, newest first.
type WebhookDeliveries struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
	// NextBefore is the ?before of the next page (null on the last).
	NextBefore *string `json:"next_before"`
}

// Message is the body of a standard delivery (Standard Webhooks' {type,
// timestamp, data}); a Slack message is rendered from it.
type Message struct {
	Type      string    `json:"type"` // the cause
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what a message tells.
type Data struct {
	Cause        string `json:"cause"`
	Text         string `json:"text"` // what happened, in a line
	Ticket       Ticket `json:"ticket"`
	Project      string `json:"project"`      // the project's key
	Organization string `json:"organization"` // the organization's slug
	EventSeq     int64  `json:"event_seq"`
}

// Ticket is the ticket a message is about.
type Ticket struct {
	Key   string `json:"key"`
	Title string `json:"title"`
	Link  string `json:"link"` // absolute: the page where a person acts
}

func (m Message) encode() string {
	b, _ := json.Marshal(m) // plain strings and numbers: cannot fail
	return string(b)
}

// Events are the payload types of the events webhook writes. None carries
// a URL (a Slack URL is itself a credential) or a secret.
var Events = []event.Payload{WebhookCreated{}, WebhookUpdated{}, WebhookDeleted{}, WebhookDisabled{},
	DeliveryQueued{}, DeliveryAttempted{}}

func (WebhookCreated) EventType() string    { return "webhook.created" }
func (WebhookUpdated) EventType() string    { return "webhook.updated" }
func (WebhookDeleted) EventType() string    { return "webhook.deleted" }
func (WebhookDisabled) EventType() string   { return "webhook.disabled" }
func (DeliveryQueued) EventType() string    { return "webhook.delivery_queued" }
func (DeliveryAttempted) EventType() string { return "webhook.delivery_attempted" }

// WebhookCreated is the payload of webhook.created.
type WebhookCreated struct {
	Events []string `json:"events"`
	Format string   `json:"format"`
	Host   string   `json:"host"` // the URL's host alone
}

// WebhookUpdated is the payload of webhook.updated: the fields changed.
type WebhookUpdated struct {
	Changed []string `json:"changed"` // url, events, format, active
	Active  bool     `json:"active"`
}

// WebhookDeleted is the payload of webhook.deleted.
type WebhookDeleted struct{}

// WebhookDisabled is the payload of webhook.disabled: its deliveries failed
// for 24 hours; its admins are notified.
type WebhookDisabled struct {
	Delivery string `json:"delivery"` // the delivery that gave up
	Error    string `json:"error"`    // its last failure
}

// DeliveryQueued is the payload of webhook.delivery_queued: a message is
// due (a cause, or a redelivery).
type DeliveryQueued struct {
	Delivery  string `json:"delivery"`
	Cause     string `json:"cause"`
	Item      string `json:"item"`
	EventSeq  int64  `json:"event_seq"` // the event that caused it
	Redeliver bool   `json:"redeliver"`
}

// DeliveryAttempted is the payload of webhook.delivery_attempted: an
// attempt's outcome.
type DeliveryAttempted struct {
	Delivery   string `json:"delivery"`
	Attempt    int    `json:"attempt"`
	Status     string `json:"status"`      // the delivery's status after it
	HTTPStatus int    `json:"http_status"` // 0: no answer
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error"`
}

// Actor is the dispatcher and the deliverer in the events they write.
var Actor = event.Actor{Kind: event.ActorSystem, Sub: "webhooks"}
