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
