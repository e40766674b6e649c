package digest

import (
	"time"
)

// A person's digest choices (notification_settings.digest).
const (
	ChoicePeriod = "period" // every [digest] every (the default)
	ChoiceWeekly = "weekly" // once a week, on Monday
	ChoiceOff    = "off"
)

// Schedule is when a person's digests close: their choice, the hour of
// their day (a 24 h period or weekly) and their time zone.
type Schedule struct {
	Choice   string
	Hour     *int           // 0–23 in Location; nil: none chosen
	Location *time.Location // nil: UTC
}

// Boundary returns the latest boundary at or before now at which a digest
// of s closes, for the platform's period every; ok is false when s is off.
//
//   - every period, with a 24 h period and an hour: that hour of each day
//     in the person's time zone (wall-clock time, so DST moves it in UTC);
//   - every period otherwise: multiples of the period since the zero time
//     in UTC (24 h: midnight UTC);
//   - weekly: Monday at the hour (00:00 when none) in the person's zone.
func Boundary(s Schedule, every time.Duration, now time.Time) (b time.Time, ok bool) {
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	hour := 0
	if s.Hour != nil {
		hour = *s.Hour
	}
	switch {
	case s.Choice == ChoiceOff:
		return time.Time{}, false
	case s.Choice == ChoiceWeekly:
		l := now.In(loc)
		back := (int(l.Weekday()) - int(time.Monday) + 7) % 7
		b = time.Date(l.Year(), l.Month(), l.Day()-back, hour, 0, 0, 0, loc)
		if b.After(now) {
			b = time.Date(l.Year(), l.Month(), l.Day()-back-7, hour, 0, 0, 0, loc)
		}
		return b.UTC(), true
	case every == 24*time.Hour && s.Hour != nil:
		l := now.In(loc)
		b = time.Date(l.Year(), l.Month(), l.Day(), hour, 0, 0, 0, loc)
		if b.After(now) {
			b = time.Date(l.Year(), l.Month(), l.Day()-1, hour, 0, 0, 0, loc)
		}
		return b.UTC(), true
	}
	return now.UTC().Truncate(every), true
}

// Previous returns the boundary before b (b a boundary of s): where a
// person's first digest starts.
func Previous(s Schedule, every time.Duration, b time.Time) time.Time {
	p, _ := Boundary(s, every, b.Add(-time.Millisecond))
	return p
}

// Next returns the first boundary after now (the zero time when s is
// off): when the next digest closes.
func Next(s Schedule, every time.Duration, now time.Time) time.Time {
	b, ok := Boundary(s, every, now)
	if !ok {
		return time.Time{}
	}
	// A boundary is at most a week (plus an hour of DST) after the one
	// before: step forward by at most that until past now.
	step := every
	if s.Choice == ChoiceWeekly || (every == 24*time.Hour && s.Hour != nil) {
		step = time.Hour
	}
	for t := b.Add(step); ; t = t.Add(step) {
		if n, _ := Boundary(s, every, t); n.After(b) {
			return n
		}
	}
}

// Last is what a person's latest digest covered (Found false: none yet).
type Last struct {
	Found    bool
	PeriodAt time.Time // its boundary
	ToSeq    int64
}

// Due tells whether a digest closes at boundary b for a person whose
// latest digest is last: when none has, or the latest closed before b. A
// period crossed while Core was down makes one digest (at the latest
// boundary), not one per boundary missed.
func Due(b time.Time, last Last) bool {
	return !last.Found || last.PeriodAt.Before(b)
}
