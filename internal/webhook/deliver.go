package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/outbound"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Delivery's knobs.
const (
	// RetryFor is how long a delivery is retried before it gives up and
	// its hook is disabled.
	RetryFor = 24 * time.Hour
	// Timeout bounds one attempt: connecting, sending, the answer's
	// headers and the part of its body read.
	Timeout = 10 * time.Second
	// MaxAnswer is how much of an answer's body is read (then dropped).
	MaxAnswer = 64 << 10
	// firstRetry and maxRetry frame the backoff: firstRetry after the
	// first failure, doubling, at most maxRetry.
	firstRetry = 10 * time.Second
	maxRetry   = 2 * time.Hour
	// maxError bounds a failure's stored text.
	maxError = 300
)

// Deliver is the job that makes a delivery's attempt (1-based).
type Deliver struct {
	Delivery string `json:"delivery"`
	Attempt  int    `json:"attempt"`
}

// Kind is the job kind of a delivery's attempt.
func (Deliver) Kind() string { return "webhook.deliver" }

// FaultSent is the crash point (internal/fault) between a receiver's 2xx
// and the attempt being recorded: the one place a delivery is posted twice
// (same webhook-id).
const FaultSent = "webhook.sent"

// DedupeKey makes each attempt of a delivery one job.
func (a Deliver) DedupeKey() string {
	return fmt.Sprintf("webhook.deliver:%s:%d", a.Delivery, a.Attempt)
}

// Backoff is the wait after a delivery's failed attempt (1-based): 10 s,
// doubling, at most 2 h.
func Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 20 {
		return maxRetry
	}
	return min(firstRetry<<(attempt-1), maxRetry)
}

// Deliverer makes deliveries' attempts (the Deliver jobs).
type Deliverer struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	// Client posts the messages (NewClient).
	Client *http.Client
	// Timeout bounds an attempt (Timeout when ≤ 0).
	Timeout time.Duration
	// Metrics counts the attempts (nil: none).
	Metrics *Metrics
}

// NewClient is the deliveries' HTTP client: no proxy, no redirect
// followed, timeout per request (Timeout when ≤ 0), and unless
// allowPrivate a dialer that refuses internal addresses after resolution
// (Control). res resolves names (nil: net.DefaultResolver); each address
// it gives is dialled in turn.
func NewClient(allowPrivate bool, res Resolver, timeout time.Duration) *http.Client {
	if res == nil {
		res = net.DefaultResolver
	}
	if timeout <= 0 {
		timeout = Timeout
	}
	dialer := &net.Dialer{Timeout: min(timeout, 5*time.Second)}
	if !allowPrivate {
		dialer.Control = Control
	}
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		addrs, err := res.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		var errs []error
		for _, a := range addrs {
			c, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("resolve %s: no address", host)
		}
		return nil, errors.Join(errs...)
	}
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, DialContext: dial, TLSHandshakeTimeout: min(timeout, 5*time.Second), ResponseHeaderTimeout: timeout,
			MaxIdleConns: 16, IdleConnTimeout: 30 * time.Second, ForceAttemptHTTP2: true},
		Timeout: timeout, CheckRedirect: outbound.NoRedirect,
	}
}

// logger is Log, or a discarding one when nil.
func (d *Deliverer) logger() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}

// Register installs the delivery's job handler.
func (d *Deliverer) Register(r job.Registry) { job.Register(r, d.handle) }

// target is what an attempt needs: the delivery and its hook.
type target struct {
	delivery, hookID, orgID, projectID string // projectID: the hook's ("" for an organization's)
	itemProject                        string // the ticket's project
	status                             string
	attempts                           int
	started                            time.Time
	payload                            string
	version, hookVersion               int64
	url, format                        string
	active                             bool
	key                                []byte
}

// read reads a delivery and its hook (found false when either is gone).
func (d *Deliverer) read(ctx context.Context, id string) (target, bool, error) {
	rows, err := d.Store.Query(ctx, `SELECT d.id, d.webhook_id, w.organization_id, w.project_id, d.project_id, d.status, d.attempts, d.started_at,
d.payload, d.version, w.version, w.url, w.format, w.active, w.secret FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = ?`, id)
	if err != nil || rows.Len() == 0 {
		return target{}, false, err
	}
	var t target
	var started int64
	var secret string
	if err := rows.Scan(0, &t.delivery, &t.hookID, &t.orgID, &t.projectID, &t.itemProject, &t.status, &t.attempts, &started, &t.payload, &t.version, &t.hookVersion,
		&t.url, &t.format, &t.active, &secret); err != nil {
		return t, false, err
	}
	t.started = store.Time(started)
	if t.key, err = base64.StdEncoding.DecodeString(secret); err != nil {
		return t, false, fmt.Errorf("webhook %s: its stored key does not decode", t.hookID)
	}
	return t, true, nil
}

// result is an attempt's outcome.
type result struct {
	code     int // 0: no answer
	duration time.Duration
	err      string // "" on success
}

func (r result) ok() bool { return r.err == "" }

// handle makes one attempt of a delivery and records it: succeeded;
// failed and retried after Backoff; or, 24 hours after its round began,
// given up, with its hook disabled. A stale job (the delivery moved on,
// was deleted, or its hook) does nothing.
func (d *Deliverer) handle(ctx context.Context, _ *job.Job, a Deliver) error {
	t, found, err := d.read(ctx, a.Delivery)
	if err != nil || !found || t.status != StatusPending || t.attempts != a.Attempt-1 {
		return err
	}
	now := d.Clock.Now().Truncate(time.Millisecond)
	if !t.active {
		if err := d.apply(ctx, skip(t, now)); err != nil {
			return err
		}
		d.Metrics.count(StatusSkipped)
		return nil
	}
	r := d.send(ctx, t, now)
	if r.ok() {
		fault.Hit(FaultSent) // the receiver took it; the delivery still reads pending
	}
	if !r.ok() {
		d.logger().Info("webhook delivery failed", "webhook", t.hookID, "delivery", t.delivery, "attempt", a.Attempt, "status", r.code, "err", r.err)
	}
	tr := record(t, a.Attempt, now, r)
	if err := d.apply(ctx, tr); err != nil {
		return err
	}
	switch {
	case r.ok():
		d.Metrics.count(StatusSucceeded)
	case len(tr.Jobs) > 0:
		d.Metrics.count("failed")
	default:
		d.Metrics.count("gave_up")
		d.logger().Warn("webhook disabled after 24 hours of failed deliveries", "webhook", t.hookID, "delivery", t.delivery)
	}
	return nil
}

// apply writes an attempt's transition. A lost race (the delivery or its
// hook changed meanwhile: deleted, disabled by another delivery) fails the
// job, whose retry reads again and finds it stale or skipped.
func (d *Deliverer) apply(ctx context.Context, t *transition.Transition) error {
	if err := d.Applier.Apply(ctx, t); err != nil {
		return fmt.Errorf("record the attempt: %w", err)
	}
	return nil
}

// skip is the transition of a delivery whose hook is inactive: skipped.
func skip(t target, now time.Time) *transition.Transition {
	return &transition.Transition{
		Events: []event.Event{event.Of(Actor, t.orgID, t.itemProject, t.hookID, DeliveryAttempted{Delivery: t.delivery, Attempt: t.attempts,
			Status: StatusSkipped, Error: "the webhook is not active"})},
		Guarded: []store.Statement{store.Stmt(`UPDATE webhook_deliveries SET status = 'skipped', next_attempt_at = NULL, updated_at = ?,
version = version + 1 WHERE id = ? AND version = ?`, now.UnixMilli(), t.delivery, t.version)},
	}
}

// record is the transition of an attempt's result (pure): the delivery's
// new state, its event, and the next attempt's job, or the hook's disabling.
func record(t target, attempt int, now time.Time, r result) *transition.Transition {
	status, next := StatusSucceeded, time.Time{}
	giveUp := false
	if !r.ok() {
		status, next = StatusPending, now.Add(Backoff(attempt))
		if end := t.started.Add(RetryFor); !now.Before(end) {
			status, next, giveUp = StatusFailed, time.Time{}, true
		} else if next.After(end) {
			next = end // the last try, when the 24 hours are up
		}
	}
	var code, nextAt any
	if r.code != 0 {
		code = r.code
	}
	if !next.IsZero() {
		nextAt = next.UnixMilli()
	}
	out := &transition.Transition{
		Events: []event.Event{event.Of(Actor, t.orgID, t.itemProject, t.hookID, DeliveryAttempted{Delivery: t.delivery, Attempt: attempt,
			Status: status, HTTPStatus: r.code, DurationMS: r.duration.Milliseconds(), Error: r.err})},
		Guarded: []store.Statement{store.Stmt(`UPDATE webhook_deliveries SET status = ?, attempts = ?, http_status = ?, duration_ms = ?, error = ?,
last_attempt_at = ?, next_attempt_at = ?, updated_at = ?, version = version + 1 WHERE id = ? AND version = ?`, status, attempt, code,
			r.duration.Milliseconds(), r.err, now.UnixMilli(), nextAt, now.UnixMilli(), t.delivery, t.version)},
	}
	if status == StatusPending {
		out.Jobs = []job.Spec{job.New(Deliver{Delivery: t.delivery, Attempt: attempt + 1}).At(next)}
	}
	if giveUp {
		// The hook's disabling, guarded by the version read (active): its
		// event is read by the dispatcher, which notifies the admins.
		out.Guarded = append(out.Guarded, store.Stmt(`UPDATE webhooks SET active = 0, disabled_at = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ?`, now.UnixMilli(), now.UnixMilli(), t.hookID, t.hookVersion))
		out.Events = append(out.Events, event.Of(Actor, t.orgID, t.projectID, t.hookID, WebhookDisabled{Delivery: t.delivery, Error: r.err}))
	}
	return out
}

// send posts the delivery's message once.
func (d *Deliverer) send(ctx context.Context, t target, now time.Time) result {
	body := []byte(t.payload)
	if t.format == FormatSlack {
		var m Message
		if err := json.Unmarshal(body, &m); err != nil {
			return result{err: "the stored message does not decode"}
		}
		body = slack(m)
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return result{err: "the URL is not valid"}
	}
	wh, err := standardwebhooks.NewWebhookRaw(t.key)
	if err != nil {
		return result{err: "the webhook has no key"}
	}
	sig, err := wh.Sign(t.delivery, now, body)
	if err != nil {
		return result{err: "signing failed"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Ballet-Webhooks/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, t.delivery)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	began := d.Clock.Now()
	resp, err := d.Client.Do(req)
	took := d.Clock.Now().Sub(began)
	if err != nil {
		return result{duration: took, err: failure(err, timeout)}
	}
	defer resp.Body.Close()
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswer))
	took = d.Clock.Now().Sub(began)
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return result{code: resp.StatusCode, duration: took, err: "answered " + resp.Status}
	case rerr != nil && !errors.Is(rerr, io.EOF):
		// A 2xx is the receiver's acceptance, whatever its body did.
		return result{code: resp.StatusCode, duration: took}
	}
	return result{code: resp.StatusCode, duration: took}
}

// failure is an attempt's error as stored: never the URL (a Slack URL is
// a credential), bounded.
func failure(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no answer within %s", timeout)
		}
		err = ue.Err
	}
	s := strings.Join(strings.Fields(err.Error()), " ")
	return clip(s)
}

// clip bounds a stored text to maxError characters.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxError {
		return s
	}
	return string([]rune(s)[:maxError-1]) + "…"
}

// slack renders a message for a Slack incoming webhook (Mattermost and
// Rocket.Chat take it too): text for notifications and clients without
// blocks, and blocks with the link.
func slack(m Message) []byte {
	t := m.Data.Ticket
	text := fmt.Sprintf("%s %s: %s — %s %s", m.Data.Cause, t.Key, t.Title, m.Data.Text, t.Link)
	mrkdwn := fmt.Sprintf("*<%s|%s: %s>*\n%s", escape(t.Link), escape(t.Key), escape(t.Title), escape(m.Data.Text))
	b, _ := json.Marshal(map[string]any{
		"text": text,
		"blocks": []any{
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": mrkdwn}},
			map[string]any{"type": "context", "elements": []any{map[string]any{"type": "mrkdwn",
				"text": escape(fmt.Sprintf("%s · %s/%s", m.Data.Cause, m.Data.Organization, m.Data.Project))}}},
		},
	})
	return b
}

// escape escapes Slack's control characters in mrkdwn text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
