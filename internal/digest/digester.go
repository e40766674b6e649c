package digest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// DefaultInterval is the longest the digester waits between passes: a
// person who chose a digest or confirmed an address is seen within it.
const DefaultInterval = time.Minute

// Digester is the leader loop that closes people's periods: one digest per
// person and period, written once across restarts and Core instances.
type Digester struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	Builder *Builder
	// Every is the platform's period ([digest] every).
	Every time.Duration
	// PlatformAdmin tells whether a person is a platform admin, who may
	// read every project (auth.Authenticator.IsPlatformAdmin).
	PlatformAdmin func(subject string) bool
	// Interval is the longest wait between passes (DefaultInterval when
	// ≤ 0); a pass also runs at every person's boundary.
	Interval time.Duration

	wake *clock.Waker
}

// Init makes the digester ready; call it once before Run or Nudge.
func (g *Digester) Init() *Digester {
	g.wake = clock.NewWaker()
	if g.Log == nil {
		g.Log = slog.New(slog.DiscardHandler)
	}
	return g
}

// Nudge asks for a pass at once; it never blocks.
func (g *Digester) Nudge() { g.wake.Nudge() }

// Run passes at once, then at the next boundary of anyone's period (at
// most every Interval) and after every nudge, until ctx ends (the leader
// runs it). A pass's error is logged; the next pass tries again.
func (g *Digester) Run(ctx context.Context) {
	every := g.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	for {
		next, _, err := g.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			g.Log.Error("digest pass (tried again at the next)", "err", err)
		}
		wait := every
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(g.Clock.Now()), 0))
		}
		if !g.wake.Wait(ctx, g.Clock, wait) {
			return
		}
	}
}

// recipient is a person who may get a digest: a confirmed address and a
// choice other than off.
type recipient struct {
	subject  string
	schedule Schedule
	saved    time.Time // when their settings were last saved
}

// Pass writes the digest of every person whose period has closed and who
// has none for it yet, and returns the next boundary of anyone's period
// and how many digests it wrote. A digest another digester wrote first is
// left to it.
func (g *Digester) Pass(ctx context.Context) (next time.Time, wrote int, err error) {
	now := g.Clock.Now().Truncate(time.Millisecond)
	people, err := g.recipients(ctx)
	if err != nil {
		return next, 0, err
	}
	var errs []error
	for _, r := range people {
		if n := Next(r.schedule, g.Every, now); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		b, ok := Boundary(r.schedule, g.Every, now)
		if !ok {
			continue
		}
		last, err := LastOf(ctx, g.Store, r.subject)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !Due(b, last) || (!last.Found && !b.After(r.saved)) {
			continue // a person's first digest closes at the first boundary after they chose it
		}
		err = g.write(ctx, r, b, last, now)
		switch {
		case errors.Is(err, store.ErrLostRace):
			g.Log.Info("digest written by another digester", "recipient", r.subject, "period", b)
		case err != nil:
			errs = append(errs, fmt.Errorf("the digest of %s for %s: %w", r.subject, b.Format(time.RFC3339), err))
		default:
			wrote++
		}
	}
	return next, wrote, errors.Join(errs...)
}

// write builds the digest of r closing at b and writes it in one batch.
func (g *Digester) write(ctx context.Context, r recipient, b time.Time, last Last, now time.Time) error {
	from, since := last.ToSeq, last.PeriodAt
	if !last.Found {
		// A person's first digest covers the period before b.
		since = Previous(r.schedule, g.Every, b)
		var err error
		if from, err = event.SeqBefore(ctx, g.Store, since); err != nil {
			return err
		}
	}
	to, err := event.LastSeq(ctx, g.Store)
	if err != nil {
		return err
	}
	d, err := g.Builder.Build(ctx, Person(r.subject, g.PlatformAdmin), from, to, since, now)
	if err != nil {
		return err
	}
	return g.Applier.Apply(ctx, decide(r.subject, b, last, d, transition.NewID(), now))
}

// decide is the batch that records a person's digest closing at b: its
// row, inserted only while the person's latest digest is last and none
// exists for b (else the batch is a lost race), its event, and the job
// that mails it when something happened.
func decide(subject string, b time.Time, last Last, d Digest, id string, now time.Time) *transition.Transition {
	status := StatusPending
	if d.Empty {
		status = StatusEmpty
	}
	key := b.UTC().Format(time.RFC3339)
	lastAt, lastSeq := int64(-1), int64(-1)
	if last.Found {
		lastAt, lastSeq = last.PeriodAt.UnixMilli(), last.ToSeq
	}
	t := &transition.Transition{
		Events: []event.Event{event.Of(Actor, "", "", id, DigestCreated{Recipient: subject, Period: key, FromSeq: d.FromSeq, ToSeq: d.ToSeq,
			Status: status, Needs: d.Needs, Finished: d.Finished, Failures: d.Failures})},
		Guarded: []store.Statement{store.Stmt(`INSERT INTO digests (id, subject, period_key, period_at, since_at, from_seq, to_seq, status, needs,
finished, failures, created_at, version)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1
WHERE COALESCE((SELECT MAX(period_at) FROM digests WHERE subject = ?), -1) = ?
  AND COALESCE((SELECT MAX(to_seq) FROM digests WHERE subject = ?), -1) = ?
ON CONFLICT (subject, period_key) DO NOTHING`,
			id, subject, key, b.UnixMilli(), d.Since.UnixMilli(), d.FromSeq, d.ToSeq, status, d.Needs, d.Finished, d.Failures, now.UnixMilli(),
			subject, lastAt, subject, lastSeq)},
	}
	if !d.Empty {
		t.Jobs = []job.Spec{job.New(SendArgs{Digest: id})}
	}
	return t
}

// recipients reads who may get a digest: the people with a confirmed
// address (entered and confirmed, or a verified OIDC claim) whose choice
// is not off. It is a read model of notification_settings.
func (g *Digester) recipients(ctx context.Context) ([]recipient, error) {
	rows, err := g.Store.Query(ctx, `SELECT subject, digest, digest_hour, time_zone, updated_at FROM notification_settings
WHERE digest <> 'off' AND email IS NOT NULL AND (email_confirmed_at IS NOT NULL OR email_source = 'oidc') ORDER BY subject`)
	if err != nil {
		return nil, fmt.Errorf("read who gets a digest: %w", err)
	}
	out := make([]recipient, 0, rows.Len())
	for i := range rows.Len() {
		var r recipient
		var hour sql.NullInt64
		var zone string
		var saved int64
		if err := rows.Scan(i, &r.subject, &r.schedule.Choice, &hour, &zone, &saved); err != nil {
			return nil, fmt.Errorf("read who gets a digest: %w", err)
		}
		if hour.Valid && hour.Int64 >= 0 && hour.Int64 <= 23 {
			h := int(hour.Int64)
			r.schedule.Hour = &h
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			g.Log.Warn("a person's time zone is unknown: their digest follows UTC", "recipient", r.subject, "time_zone", zone)
			loc = time.UTC
		}
		r.schedule.Location, r.saved = loc, store.Time(saved)
		out = append(out, r)
	}
	return out, nil
}

// LatestSQL reads a person's latest digest: two index lookups, however
// many digests they had.
const LatestSQL = `SELECT (SELECT MAX(period_at) FROM digests WHERE subject = ?), (SELECT MAX(to_seq) FROM digests WHERE subject = ?)`

// LastOf reads a person's latest digest.
func LastOf(ctx context.Context, q event.Querier, subject string) (Last, error) {
	rows, err := q.Query(ctx, LatestSQL, subject, subject)
	if err != nil {
		return Last{}, fmt.Errorf("read the latest digest: %w", err)
	}
	var at, seq sql.NullInt64
	if err := rows.Scan(0, &at, &seq); err != nil || !at.Valid {
		return Last{}, err
	}
	return Last{Found: true, PeriodAt: store.Time(at.Int64), ToSeq: seq.Int64}, nil
}

// person is a person as access sees them: their own memberships, or
// everything as a platform admin.
type person struct {
	subject string
	admin   bool
}

// Person is the principal a digest of subject is built for.
func Person(subject string, platformAdmin func(string) bool) access.Principal {
	return person{subject: subject, admin: platformAdmin != nil && platformAdmin(subject)}
}

func (p person) AccessSubject() string                 { return p.subject }
func (p person) IsPlatformAdmin() bool                 { return p.admin }
func (p person) TokenGrant() (g access.Grant, ok bool) { return access.Grant{}, false }
