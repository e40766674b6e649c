package budget

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has
)

func ptr(v int64) *int64 { return &v }

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		l    Limits
		s    Spend
		want string
	}{
		{Limits{}, Spend{Ticket: 1e9, Day: 1e9}, OK},
		{Limits{PerTicket: ptr(5e6)}, Spend{Ticket: 4999999}, OK},
		{Limits{PerTicket: ptr(5e6)}, Spend{Ticket: 5e6}, TicketSpent},
		{Limits{PerDay: ptr(10e6)}, Spend{Day: 10e6}, DaySpent},
		{Limits{PerDay: ptr(10e6)}, Spend{Day: 9e6}, OK},
		{Limits{PerTicket: ptr(1), PerDay: ptr(1)}, Spend{Ticket: 1, Day: 1}, TicketSpent}, // waiting would not help
		{Limits{PerTicket: ptr(0)}, Spend{}, TicketSpent},                                  // a zero budget allows nothing
	} {
		if got := Check(c.l, c.s); got.Kind != c.want || (got.Kind != OK && got.Reason == "") {
			t.Errorf("Check(%+v, %+v) = %+v, want %s", c.l, c.s, got, c.want)
		}
	}
}

func TestDayInTimeZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{Location: ny}
	start, end := s.Day(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)) // 22:00 the day before in New York
	if start.Format(time.RFC3339) != "2026-11-29T00:00:00-05:00" || end.Sub(start) != 24*time.Hour {
		t.Fatalf("day %v – %v", start, end)
	}
	u := &Service{}
	start, _ = u.Day(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))
	if !start.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("UTC day starts %v", start)
	}
}

// The budget day is midnight to midnight in the configured zone, whatever
// the offset (a quarter hour, ahead of or behind UTC) and however long the
// day (23 or 25 hours when summer time starts or ends); the instant a day
// starts belongs to it, the one it ends to the next.
func TestDayBoundaries(t *testing.T) {
	for _, c := range []struct {
		zone       string
		t          time.Time
		start, end string // RFC 3339 in the zone
	}{
		{"UTC", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"},
		{"UTC", time.Date(2026, 12, 1, 23, 59, 59, 999e6, time.UTC), "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"},
		{"Asia/Kathmandu", time.Date(2026, 12, 1, 18, 14, 0, 0, time.UTC), "2026-12-01T00:00:00+05:45", "2026-12-02T00:00:00+05:45"},
		{"Asia/Kathmandu", time.Date(2026, 12, 1, 18, 15, 0, 0, time.UTC), "2026-12-02T00:00:00+05:45", "2026-12-03T00:00:00+05:45"},
		{"Pacific/Kiritimati", time.Date(2026, 12, 1, 9, 59, 0, 0, time.UTC), "2026-12-01T00:00:00+14:00", "2026-12-02T00:00:00+14:00"},
		{"Pacific/Kiritimati", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), "2026-12-02T00:00:00+14:00", "2026-12-03T00:00:00+14:00"},
		{"America/New_York", time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00"}, // 25 hours
		{"Europe/Berlin", time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC), "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"},    // 23 hours
		{"Europe/Berlin", time.Date(2026, 3, 28, 22, 59, 59, 0, time.UTC), "2026-03-28T00:00:00+01:00", "2026-03-29T00:00:00+01:00"},
	} {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		start, end := (&Service{Location: loc}).Day(c.t)
		if start.Format(time.RFC3339) != c.start || end.Format(time.RFC3339) != c.end {
			t.Errorf("%s, %s: day %s – %s, want %s – %s", c.zone, c.t, start.Format(time.RFC3339), end.Format(time.RFC3339), c.start, c.end)
		}
		if c.t.Before(start) || !c.t.Before(end) {
			t.Errorf("%s: %s is not in its day", c.zone, c.t)
		}
	}
}
