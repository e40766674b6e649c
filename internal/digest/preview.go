package digest

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
)

// Preview builds a person's current digest: what their next one would
// contain now (GET /api/v1/me/digest).
type Preview struct {
	Builder *Builder
	Clock   clock.Clock
	Every   time.Duration // [digest] every
	Enabled bool          // [digest] enabled
}

// Current returns the digest of subject as p may read it now: the events
// since the person's last digest (or, before their first, since their
// period's latest boundary), what needs them now and the spend.
func (v *Preview) Current(ctx context.Context, p access.Principal, subject string) (Digest, error) {
	now := v.Clock.Now().Truncate(time.Millisecond)
	q := v.Builder.Store
	sched, mailed, err := scheduleOf(ctx, q, subject)
	if err != nil {
		return Digest{}, err
	}
	last, err := LastOf(ctx, q, subject)
	if err != nil {
		return Digest{}, err
	}
	from, since := last.ToSeq, last.PeriodAt
	if !last.Found {
		s := sched
		if s.Choice == ChoiceOff {
			s.Choice = ChoicePeriod // what it would cover if they chose one
		}
		since, _ = Boundary(s, v.Every, now)
		if from, err = event.SeqBefore(ctx, q, since); err != nil {
			return Digest{}, err
		}
	}
	to, err := event.LastSeq(ctx, q)
	if err != nil {
		return Digest{}, err
	}
	d, err := v.Builder.Build(ctx, p, from, to, since, now)
	if err != nil {
		return d, err
	}
	if next := Next(sched, v.Every, now); v.Enabled && mailed && !next.IsZero() {
		d.NextAt = &next
	}
	return d, nil
}

// scheduleOf reads a person's digest choice (the defaults without a row)
// and whether a digest can be mailed to them (a confirmed address, a
// choice other than off). It is a read model of notification_settings.
func scheduleOf(ctx context.Context, q event.Querier, subject string) (Schedule, bool, error) {
	rows, err := q.Query(ctx, `SELECT digest, digest_hour, time_zone, email IS NOT NULL AND (email_confirmed_at IS NOT NULL OR email_source = 'oidc')
FROM notification_settings WHERE subject = ?`, subject)
	if err != nil {
		return Schedule{}, false, fmt.Errorf("read the digest choice of %s: %w", subject, err)
	}
	s := Schedule{Choice: ChoicePeriod, Location: time.UTC}
	if rows.Len() == 0 {
		return s, false, nil
	}
	var hour sql.NullInt64
	var zone string
	var confirmed bool
	if err := rows.Scan(0, &s.Choice, &hour, &zone, &confirmed); err != nil {
		return s, false, fmt.Errorf("read the digest choice of %s: %w", subject, err)
	}
	if hour.Valid && hour.Int64 >= 0 && hour.Int64 <= 23 {
		h := int(hour.Int64)
		s.Hour = &h
	}
	if loc, err := time.LoadLocation(zone); err == nil {
		s.Location = loc
	}
	return s, confirmed && s.Choice != ChoiceOff, nil
}
