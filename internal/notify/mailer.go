package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/notify/mail"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Delivery statuses (mail_deliveries.status).
const (
	DeliveryPending  = "pending"
	DeliveryRetrying = "retrying"
	DeliverySent     = "sent"
	DeliverySkipped  = "skipped"
	DeliveryFailed   = "failed"
)

// Paths of the mail links' pages (server.MailLinks serves them; no login:
// the signature is the credential). Below /api/, which the web UI never
// answers, though they answer HTML pages.
const (
	UnsubscribePath = "/api/v1/mail/unsubscribe"
	ConfirmPath     = "/api/v1/mail/confirm"
)

// MailArgs is the durable job notify.mail: mail one notification.
type MailArgs struct {
	NotificationID string `json:"notification_id"`
}

func (MailArgs) Kind() string { return "notify.mail" }

// FaultMailSent is the crash point (internal/fault) between the SMTP
// server accepting a notification's mail and its delivery being recorded
// as sent: the one place a mail goes out twice (same Message-ID).
const FaultMailSent = "notify.mail.sent"

// DedupeKey: one job per notification (its delivery row is the lasting
// guard).
func (a MailArgs) DedupeKey() string { return "notify.mail:" + a.NotificationID }

// ConfirmArgs is the durable job notify.confirm: mail the confirmation link
// of the address subject entered at settings version Version.
type ConfirmArgs struct {
	Subject string `json:"subject"`
	Version int64  `json:"version"`
}

func (ConfirmArgs) Kind() string { return "notify.confirm" }

// DedupeKey: one job per address entered.
func (a ConfirmArgs) DedupeKey() string {
	return fmt.Sprintf("notify.confirm:%s:%d", a.Subject, a.Version)
}

// Events of the mail.
func (NotificationMailed) EventType() string     { return "notification.mailed" }
func (NotificationMailFailed) EventType() string { return "notification.mail_failed" }
func (NotificationMailSkipped) EventType() string {
	return "notification.mail_skipped"
}

// NotificationMailed is the payload of notification.mailed: the SMTP
// server accepted a notification's mail.
type NotificationMailed struct {
	Recipient string `json:"recipient"`
	Cause     string `json:"cause"`
	Item      string `json:"item"`
	MessageID string `json:"message_id"`
	Attempt   int    `json:"attempt"`
}

// NotificationMailFailed is the payload of notification.mail_failed: an
// attempt failed; Final when no other follows.
type NotificationMailFailed struct {
	Recipient string `json:"recipient"`
	Cause     string `json:"cause"`
	Item      string `json:"item"`
	Attempt   int    `json:"attempt"`
	Error     string `json:"error"`
	SMTPCode  int    `json:"smtp_code,omitempty"`
	Final     bool   `json:"final"`
}

// NotificationMailSkipped is the payload of notification.mail_skipped: a
// mail was no longer allowed when its turn came.
type NotificationMailSkipped struct {
	Recipient string `json:"recipient"`
	Cause     string `json:"cause"`
	Item      string `json:"item"`
	Reason    string `json:"reason"` // no_access, not_mail, no_address, mail_off
}

// Sender sends one mail (mail.Sender).
type Sender interface {
	Send(ctx context.Context, m mail.Message) error
}

// Mailer runs the mail jobs: a notification's mail, an address's
// confirmation.
type Mailer struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	// Sender sends the mail (nil: mail is off; a delivery's job then
	// records it skipped, a confirmation's does nothing).
	Sender Sender
	Keys   *Keys
	// BaseURL is [notify] base_url: where links point.
	BaseURL string
	Roles   RoleReader
	// PlatformAdmin tells whether a person is a platform admin.
	PlatformAdmin func(subject string) bool
	Metrics       *MailMetrics
}

// Register installs the mail jobs' handlers.
func (m *Mailer) Register(r job.Registry) {
	job.Register(r, m.handleMail)
	job.Register(r, m.handleConfirm)
}

// delivery is a mail_deliveries row.
type delivery struct {
	status    string
	messageID string
	version   int64
}

func readDelivery(ctx context.Context, s store.Store, id string) (delivery, bool, error) {
	rows, err := s.Query(ctx, `SELECT status, message_id, version FROM mail_deliveries WHERE notification_id = ?`, id)
	if err != nil {
		return delivery{}, false, fmt.Errorf("read mail delivery: %w", err)
	}
	if rows.Len() == 0 {
		return delivery{}, false, nil
	}
	var d delivery
	return d, true, rows.Scan(0, &d.status, &d.messageID, &d.version)
}

// handleMail mails one notification: re-checks that it is still allowed
// (the recipient may read the project, wants this cause mailed and has a
// confirmed address), sends it and records the outcome with its event. A
// failed attempt is recorded and returned, so the job retries with
// backoff; the last one (or a refusal no retry can change) marks the
// delivery failed.
func (m *Mailer) handleMail(ctx context.Context, j *job.Job, a MailArgs) error {
	d, ok, err := readDelivery(ctx, m.Store, a.NotificationID)
	if err != nil {
		return err
	}
	if !ok || d.status == DeliverySent || d.status == DeliverySkipped || d.status == DeliveryFailed {
		return nil // done already (a job run again after a crash)
	}
	rows, err := m.Store.Query(ctx, `SELECT `+columns+` FROM notifications WHERE id = ?`, a.NotificationID)
	if err != nil {
		return fmt.Errorf("read notification: %w", err)
	}
	ns, err := scan(rows)
	if err != nil || len(ns) == 0 {
		return err
	}
	n := ns[0]
	set, err := ReadSettings(ctx, m.Store, n.recipient)
	if err != nil {
		return err
	}
	reason := ""
	if m.Sender == nil {
		reason = "mail_off" // turned off since the delivery was decided
	} else if ok, err := m.mayRead(ctx, n.recipient, n.OrganizationID, n.ProjectID); err != nil {
		return err
	} else if !ok {
		reason = "no_access"
	} else if set.Choice(n.Cause) != ChoiceMail {
		reason = "not_mail"
	} else if set.MailTo(n.Cause) == "" {
		reason = "no_address"
	}
	now := func() time.Time { return m.Clock.Now().Truncate(time.Millisecond) }
	if reason != "" {
		m.Metrics.count(DeliverySkipped)
		return m.record(ctx, n, d, DeliverySkipped, j.Attempt, "", 0, now(),
			NotificationMailSkipped{Recipient: n.recipient, Cause: n.Cause, Item: n.Item, Reason: reason})
	}
	msg, err := m.compose(ctx, n, set.MailTo(n.Cause), d.messageID)
	if err != nil {
		return err
	}
	start := m.Clock.Now()
	serr := m.Sender.Send(ctx, msg)
	m.Metrics.observe(m.Clock.Now().Sub(start))
	if serr == nil {
		fault.Hit(FaultMailSent) // the server took it; the delivery still reads pending
		m.Metrics.count(DeliverySent)
		return m.record(ctx, n, d, DeliverySent, j.Attempt, "", 0, now(),
			NotificationMailed{Recipient: n.recipient, Cause: n.Cause, Item: n.Item, MessageID: d.messageID, Attempt: j.Attempt})
	}
	final := !mail.Temporary(serr) || j.LastTry()
	status := DeliveryRetrying
	if final {
		status = DeliveryFailed
	}
	m.Metrics.count(status)
	msgErr := clipError(serr.Error())
	m.Log.Warn("mail not sent", "notification", n.ID, "cause", n.Cause, "item", n.Item, "attempt", j.Attempt, "final", final, "err", msgErr)
	if err := m.record(ctx, n, d, status, j.Attempt, msgErr, mail.Code(serr), now(),
		NotificationMailFailed{Recipient: n.recipient, Cause: n.Cause, Item: n.Item, Attempt: j.Attempt, Error: msgErr,
			SMTPCode: mail.Code(serr), Final: final}); err != nil {
		return err
	}
	if final {
		return job.Permanent(fmt.Errorf("mail of notification %s: %s", n.ID, msgErr))
	}
	return fmt.Errorf("mail of notification %s: %s", n.ID, msgErr)
}

// record writes a delivery's outcome with its event, guarded by the
// version read.
func (m *Mailer) record(ctx context.Context, n Notification, d delivery, status string, attempt int, lastErr string, code int,
	now time.Time, p event.Payload) error {
	var errArg, codeArg, sentArg any
	if lastErr != "" {
		errArg = lastErr
	}
	if code != 0 {
		codeArg = code
	}
	if status == DeliverySent {
		sentArg = now.UnixMilli()
	}
	return m.Applier.Apply(ctx, &transition.Transition{
		Events: []event.Event{event.Of(Actor, "", "", n.ID, p)},
		Guarded: []store.Statement{store.Stmt(`UPDATE mail_deliveries SET status = ?, attempts = ?, last_error = COALESCE(?, last_error),
smtp_code = COALESCE(?, smtp_code), sent_at = ?, updated_at = ?, version = version + 1 WHERE notification_id = ? AND version = ?`,
			status, attempt, errArg, codeArg, sentArg, now.UnixMilli(), n.ID, d.version)},
	})
}

func (m *Mailer) mayRead(ctx context.Context, subject, orgID, projectID string) (bool, error) {
	return (&Notifier{Roles: m.Roles, PlatformAdmin: m.PlatformAdmin}).mayRead(ctx, subject, orgID, projectID)
}

// clipError keeps an error's first 500 characters, on one line.
func clipError(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// MessageID is the Message-ID of a notification's mail: derived from the
// ticket and the notification, so every attempt has the same.
func MessageID(itemID, notificationID, host string) string {
	return "n-" + notificationID + ".t-" + itemID + "@" + host
}

// ThreadID is the id every mail of a ticket refers to (References,
// In-Reply-To), so mail readers thread them together.
func ThreadID(itemID, host string) string { return "t-" + itemID + "@" + host }

// Host is the host of base_url, the right side of Ballet's Message-IDs.
func Host(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" {
		return "ballet.invalid"
	}
	return u.Hostname()
}

// causeNeeds says, in a subject, what a cause needs of its reader.
var causeNeeds = map[string]string{
	CauseApprovalWaiting:   "Approval needed",
	CauseQuestionOpened:    "Question",
	CauseMergeWaiting:      "Merge waiting",
	CauseFlowStuck:         "Flow stuck",
	CauseFlowFailed:        "Flow failed",
	CauseBudgetExhausted:   "Budget used up",
	CauseTicketDone:        "Done",
	CauseWebhookDisabled:   "Webhook disabled",
	CauseRunnerMissing:     "No runner",
	CauseQuestionEscalated: "Escalated",
}

// Subject is a notification mail's subject: the ticket's key and what is
// needed, e.g. "[ACME-7] Question: Which database?".
func Subject(cause, item, text, title string) string {
	what := causeNeeds[cause]
	if what == "" {
		what = cause
	}
	detail := text
	if p, ok := strings.CutPrefix(text, "Question: "); ok && cause == CauseQuestionOpened {
		detail = p
	}
	if cause != CauseQuestionOpened {
		detail = title
	}
	s := "[" + item + "] " + what + ": " + detail
	if item == "" { // of no ticket (a webhook disabled)
		s = what + ": " + detail
	}
	if r := []rune(s); len(r) > 150 {
		s = string(r[:149]) + "…"
	}
	return s
}

var htmlMail = htmltemplate.Must(htmltemplate.New("mail").Parse(`<!DOCTYPE html>
<html><body style="font-family: sans-serif; line-height: 1.4">
<p>{{if .Item}}<strong>{{.Item}}</strong> · {{end}}{{.Title}}</p>
<p>{{.Text}}</p>
<p><a href="{{.Link}}" style="display: inline-block; padding: 8px 14px; background: #2d5bd3; color: #fff; text-decoration: none; border-radius: 4px">{{.Action}}</a></p>
<p style="color: #666; font-size: 12px">Ballet sent this because of your notification settings.
<a href="{{.Unsubscribe}}">Stop mail like this</a>.</p>
</body></html>
`))

// action names the button of a cause's mail.
func action(cause string) string {
	switch cause {
	case CauseApprovalWaiting:
		return "Review and approve"
	case CauseQuestionOpened, CauseQuestionEscalated:
		return "Answer"
	case CauseMergeWaiting:
		return "Review the pull request"
	case CauseWebhookDisabled:
		return "Open the settings"
	}
	return "Open the ticket"
}

// compose builds a notification's mail to addr.
func (m *Mailer) compose(ctx context.Context, n Notification, addr, messageID string) (mail.Message, error) {
	base := strings.TrimRight(m.BaseURL, "/")
	link := base + n.Link
	unsub, err := m.Keys.UnsubscribeLink(ctx, base, n.recipient, n.Cause)
	if err != nil {
		return mail.Message{}, err
	}
	head := n.Item + " · " + n.Title
	var refs []string
	if n.ItemID != "" {
		refs = []string{ThreadID(n.ItemID, Host(m.BaseURL))}
	} else { // of no ticket: no ticket's thread
		head = n.Title
	}
	text := fmt.Sprintf("%s\n\n%s\n\n%s: %s\n\n-- \nBallet sent this because of your notification settings.\nStop mail like this: %s\n",
		head, n.Text, action(n.Cause), link, unsub)
	var html bytes.Buffer
	if err := htmlMail.Execute(&html, map[string]string{"Item": n.Item, "Title": n.Title, "Text": n.Text, "Link": link,
		"Action": action(n.Cause), "Unsubscribe": unsub}); err != nil {
		return mail.Message{}, fmt.Errorf("render mail: %w", err)
	}
	return mail.Message{To: addr, Subject: Subject(n.Cause, n.Item, n.Text, n.Title), Text: text, HTML: html.String(),
		MessageID: messageID, References: refs, Unsubscribe: unsub}, nil
}

// handleConfirm mails the confirmation link of an entered address, unless
// it was replaced or confirmed meanwhile. A failure retries; nothing else
// is ever sent to an unconfirmed address.
func (m *Mailer) handleConfirm(ctx context.Context, _ *job.Job, a ConfirmArgs) error {
	if m.Sender == nil {
		return nil // mail is off: the address cannot be confirmed until it is on and entered again
	}
	set, err := ReadSettings(ctx, m.Store, a.Subject)
	if err != nil {
		return err
	}
	if set.Version != a.Version || set.Email == nil || set.EmailConfirmed || set.confirmHash == "" {
		return nil // replaced or confirmed since
	}
	tok, err := m.Keys.ConfirmToken(ctx, a.Subject, *set.Email, a.Version)
	if err != nil {
		return err
	}
	link := strings.TrimRight(m.BaseURL, "/") + ConfirmPath + "?t=" + url.QueryEscape(tok)
	text := fmt.Sprintf("Someone (we hope you) asked Ballet to send notifications to this address.\n\nConfirm it: %s\n\n"+
		"The link works for %s. If you did not ask, ignore this mail: nothing else is sent here.\n", link, ConfirmFor)
	var html bytes.Buffer
	if err := confirmHTML.Execute(&html, map[string]string{"Link": link, "For": ConfirmFor.String()}); err != nil {
		return fmt.Errorf("render mail: %w", err)
	}
	err = m.Sender.Send(ctx, mail.Message{To: *set.Email, Subject: "Confirm your address for Ballet's notifications", Text: text,
		HTML: html.String(), MessageID: fmt.Sprintf("c-%d.%s@%s", a.Version, hashToken(a.Subject)[:16], Host(m.BaseURL))})
	if err != nil && !mail.Temporary(err) {
		return job.Permanent(errors.New(clipError(err.Error())))
	}
	return err
}

var confirmHTML = htmltemplate.Must(htmltemplate.New("confirm").Parse(`<!DOCTYPE html>
<html><body style="font-family: sans-serif; line-height: 1.4">
<p>Someone (we hope you) asked Ballet to send notifications to this address.</p>
<p><a href="{{.Link}}">Confirm this address</a></p>
<p style="color: #666; font-size: 12px">The link works for {{.For}}. If you did not ask, ignore this mail: nothing else is sent here.</p>
</body></html>
`))

// deliveryWrite is the delivery row and job of a notification to mail,
// for the notifier's batch.
func deliveryWrite(x Notification, host string, now time.Time) (store.Statement, job.Spec) {
	return store.Stmt(`INSERT INTO mail_deliveries (notification_id, recipient, cause, item_key, message_id, status, attempts,
created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, 1)`, x.ID, x.recipient, x.Cause, x.Item,
		MessageID(x.ItemID, x.ID, host), now.UnixMilli(), now.UnixMilli()), job.New(MailArgs{NotificationID: x.ID})
}
