package digest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Message is one mail as the digest hands it to a Mailer.
type Message struct {
	To          string
	Subject     string
	Text        string
	HTML        string
	MessageID   string   // <…@…>, the same on every attempt of one digest
	References  []string // none for a digest
	Unsubscribe string   // the one-click unsubscribe link ("" when none)
}

// Mailer sends a mail; an error means it may not have been accepted (the
// job retries it).
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// SendArgs is the job that mails a digest (kind digest.send).
type SendArgs struct {
	Digest string `json:"digest"` // the digests row's id
}

func (SendArgs) Kind() string { return "digest.send" }

// FaultSent is the crash point (internal/fault) between the SMTP server
// accepting a digest and the digest being recorded as sent: the one place
// a digest goes out twice (same Message-ID).
const FaultSent = "digest.mail.sent"

func (a SendArgs) DedupeKey() string { return "digest.send:" + a.Digest }

// Sender mails the digests the Digester wrote: the digest.send job's
// handler.
type Sender struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	Builder *Builder
	Mailer  Mailer
	// PlatformAdmin tells whether a person is a platform admin
	// (auth.Authenticator.IsPlatformAdmin).
	PlatformAdmin func(subject string) bool
	// Unsubscribe, when set, makes the one-click link (RFC 8058) that
	// turns a person's digest off.
	Unsubscribe func(ctx context.Context, subject string) (string, error)
	// MessageDomain is the right-hand side of the Message-ID (the base
	// URL's host).
	MessageDomain string
}

// Register installs the digest.send handler.
func (s *Sender) Register(r job.Registry) { job.Register(r, s.send) }

// row is a digests row as the sender reads it.
type row struct {
	id, subject, periodKey, status string
	sinceAt                        int64
	fromSeq, toSeq                 int64
	version                        int64
}

// send mails a pending digest: it re-reads the row and the person's
// confirmed address, builds the content again (only the projects the
// person may read now; what needs them now), renders it and sends it, then
// records the outcome with its event. A digest no longer pending is done.
func (s *Sender) send(ctx context.Context, j *job.Job, a SendArgs) error {
	r, err := readRow(ctx, s.Store, a.Digest)
	if apperr.Code(err) == apperr.NotFound {
		return job.Permanent(fmt.Errorf("digest %s: %w", a.Digest, err))
	}
	if err != nil {
		return err
	}
	if r.status != StatusPending {
		return nil
	}
	to, found, err := Address(ctx, s.Store, r.subject)
	if err != nil {
		return err
	}
	if !found {
		return s.record(ctx, r, StatusSkipped, "no confirmed address")
	}
	now := s.Clock.Now()
	d, err := s.Builder.Build(ctx, Person(r.subject, s.PlatformAdmin), r.fromSeq, r.toSeq, store.Time(r.sinceAt), now)
	if err != nil {
		return err
	}
	html, err := HTML(d)
	if err != nil {
		return job.Permanent(err)
	}
	m := Message{To: to, Subject: d.Subject, Text: Text(d), HTML: html, MessageID: "<digest-" + r.id + "@" + s.domain() + ">"}
	if s.Unsubscribe != nil {
		if m.Unsubscribe, err = s.Unsubscribe(ctx, r.subject); err != nil {
			return fmt.Errorf("the digest's unsubscribe link: %w", err)
		}
	}
	if err := s.Mailer.Send(ctx, m); err != nil {
		if j.LastTry() {
			if rerr := s.record(ctx, r, StatusFailed, err.Error()); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return fmt.Errorf("mail the digest %s: %w", r.id, err)
	}
	fault.Hit(FaultSent) // the server took it; the digest still reads pending
	return s.record(ctx, r, StatusSent, "")
}

func (s *Sender) domain() string {
	if s.MessageDomain != "" {
		return s.MessageDomain
	}
	return "ballet"
}

// record writes a digest's outcome: its status, guarded by the pending
// row read, and its event. Lost to another (the outcome is recorded
// already), it is done.
func (s *Sender) record(ctx context.Context, r row, status, why string) error {
	now := s.Clock.Now().Truncate(time.Millisecond)
	err := s.Applier.Apply(ctx, outcome(r, status, why, now))
	if errors.Is(err, store.ErrLostRace) {
		return nil
	}
	return err
}

// outcome is the batch that records a pending digest's outcome.
func outcome(r row, status, why string, now time.Time) *transition.Transition {
	var p event.Payload = DigestSent{Recipient: r.subject, Period: r.periodKey}
	var sentAt any
	if status == StatusSent {
		sentAt = now.UnixMilli()
	} else {
		p = DigestFailed{Recipient: r.subject, Period: r.periodKey, Status: status, Error: clip(why)}
	}
	var errText any
	if why != "" {
		errText = clip(why)
	}
	return &transition.Transition{
		Events: []event.Event{event.Of(Actor, "", "", r.id, p)},
		Guarded: []store.Statement{store.Stmt(`UPDATE digests SET status = ?, sent_at = ?, error = ?, version = version + 1
WHERE id = ? AND status = 'pending' AND version = ?`, status, sentAt, errText, r.id, r.version)},
	}
}

// readRow reads a digests row.
func readRow(ctx context.Context, s store.Store, id string) (row, error) {
	rows, err := store.One(ctx, s, "digest "+id, `SELECT id, subject, period_key, status, since_at, from_seq, to_seq, version FROM digests WHERE id = ?`, id)
	if err != nil {
		return row{}, err
	}
	var r row
	return r, rows.Scan(0, &r.id, &r.subject, &r.periodKey, &r.status, &r.sinceAt, &r.fromSeq, &r.toSeq, &r.version)
}

// Address reads a person's confirmed address (found false when they have
// none: none known, or an entered one not confirmed yet). It is a read
// model of notification_settings.
func Address(ctx context.Context, q event.Querier, subject string) (string, bool, error) {
	rows, err := q.Query(ctx, `SELECT email FROM notification_settings WHERE subject = ? AND email IS NOT NULL
AND (email_confirmed_at IS NOT NULL OR email_source = 'oidc')`, subject)
	if err != nil {
		return "", false, fmt.Errorf("read the address of %s: %w", subject, err)
	}
	if rows.Len() == 0 {
		return "", false, nil
	}
	var to string
	return to, true, rows.Scan(0, &to)
}
