package digest

import (
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func hour(h int) *int { return &h }

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// TestBoundary: the default 24 h period closes at midnight UTC; another
// period at its multiples; a chosen hour is wall-clock time in the person's
// zone, so across a DST change it moves in UTC (Berlin: 09:00 is 08:00 UTC
// in winter, 07:00 UTC in summer; the change was on 29 March 2026); weekly
// is Monday at the hour, also across a DST change (New York, 1 November
// 2026); off has none.
func TestBoundary(t *testing.T) {
	berlin, ny := mustZone(t, "Europe/Berlin"), mustZone(t, "America/New_York")
	day := 24 * time.Hour
	for _, c := range []struct {
		name  string
		s     Schedule
		every time.Duration
		now   string
		want  string // "" when none
	}{
		{"default day", Schedule{Choice: ChoicePeriod}, day, "2026-12-06T07:45:00Z", "2026-12-06T00:00:00Z"},
		{"at midnight", Schedule{Choice: ChoicePeriod}, day, "2026-12-06T00:00:00Z", "2026-12-06T00:00:00Z"},
		{"hourly", Schedule{Choice: ChoicePeriod, Hour: hour(9)}, time.Hour, "2026-12-06T07:45:00Z", "2026-12-06T07:00:00Z"},
		{"every minute", Schedule{Choice: ChoicePeriod}, time.Minute, "2026-12-06T07:45:31Z", "2026-12-06T07:45:00Z"},
		{"9h Berlin, winter, before", Schedule{Choice: ChoicePeriod, Hour: hour(9), Location: berlin}, day, "2026-03-28T07:59:00Z", "2026-03-27T08:00:00Z"},
		{"9h Berlin, winter", Schedule{Choice: ChoicePeriod, Hour: hour(9), Location: berlin}, day, "2026-03-28T08:00:00Z", "2026-03-28T08:00:00Z"},
		{"9h Berlin, the DST day", Schedule{Choice: ChoicePeriod, Hour: hour(9), Location: berlin}, day, "2026-03-29T07:30:00Z", "2026-03-29T07:00:00Z"},
		{"9h Berlin, the DST day, before", Schedule{Choice: ChoicePeriod, Hour: hour(9), Location: berlin}, day, "2026-03-29T06:59:00Z", "2026-03-28T08:00:00Z"},
		{"no hour: UTC midnight whatever the zone", Schedule{Choice: ChoicePeriod, Location: berlin}, day, "2026-03-29T07:30:00Z", "2026-03-29T00:00:00Z"},
		{"weekly, Monday 8h New York, EDT", Schedule{Choice: ChoiceWeekly, Hour: hour(8), Location: ny}, day, "2026-10-28T12:00:00Z", "2026-10-26T12:00:00Z"},
		{"weekly, the Monday after DST ended", Schedule{Choice: ChoiceWeekly, Hour: hour(8), Location: ny}, day, "2026-11-02T13:00:00Z", "2026-11-02T13:00:00Z"},
		{"weekly, that Monday before 8h EST", Schedule{Choice: ChoiceWeekly, Hour: hour(8), Location: ny}, day, "2026-11-02T12:30:00Z", "2026-10-26T12:00:00Z"},
		{"weekly, Sunday", Schedule{Choice: ChoiceWeekly}, day, "2026-12-06T07:45:00Z", "2026-11-30T00:00:00Z"},
		{"off", Schedule{Choice: ChoiceOff}, day, "2026-12-06T07:45:00Z", ""},
	} {
		got, ok := Boundary(c.s, c.every, utc(c.now))
		switch {
		case c.want == "" && ok:
			t.Errorf("%s: boundary %s, want none", c.name, got)
		case c.want != "" && (!ok || !got.Equal(utc(c.want))):
			t.Errorf("%s: boundary %s (%v), want %s", c.name, got.Format(time.RFC3339), ok, c.want)
		}
	}
}

// TestNextAndPrevious: the boundary after and before, across the DST
// changes (a day of 23 hours in spring, of 25 in autumn).
func TestNextAndPrevious(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	nine := Schedule{Choice: ChoicePeriod, Hour: hour(9), Location: berlin}
	day := 24 * time.Hour
	if got := Next(nine, day, utc("2026-03-28T08:00:00Z")); !got.Equal(utc("2026-03-29T07:00:00Z")) {
		t.Errorf("next after the winter 9h: %s, want 07:00 UTC on the DST day (23 h later)", got)
	}
	if got := Previous(nine, day, utc("2026-03-29T07:00:00Z")); !got.Equal(utc("2026-03-28T08:00:00Z")) {
		t.Errorf("previous: %s", got)
	}
	if got := Next(nine, day, utc("2026-10-24T07:00:00Z")); !got.Equal(utc("2026-10-25T08:00:00Z")) {
		t.Errorf("next across the autumn DST change: %s, want 08:00 UTC (25 h later)", got)
	}
	if got := Next(Schedule{Choice: ChoiceWeekly}, day, utc("2026-12-06T07:45:00Z")); !got.Equal(utc("2026-12-07T00:00:00Z")) {
		t.Errorf("next weekly: %s", got)
	}
	if got := Next(Schedule{Choice: ChoicePeriod}, time.Hour, utc("2026-12-06T07:45:00Z")); !got.Equal(utc("2026-12-06T08:00:00Z")) {
		t.Errorf("next hourly: %s", got)
	}
	if got := Next(Schedule{Choice: ChoiceOff}, day, utc("2026-12-06T07:45:00Z")); !got.IsZero() {
		t.Errorf("next when off: %s", got)
	}
}

// TestDue: due once per boundary; a person's first digest is due at once;
// several boundaries missed make one digest (the latest is due, the ones
// before are not asked for).
func TestDue(t *testing.T) {
	b := utc("2026-12-06T00:00:00Z")
	for _, c := range []struct {
		name string
		last Last
		want bool
	}{
		{"never", Last{}, true},
		{"the day before", Last{Found: true, PeriodAt: b.Add(-24 * time.Hour)}, true},
		{"three days before (Core was down)", Last{Found: true, PeriodAt: b.Add(-72 * time.Hour)}, true},
		{"this one", Last{Found: true, PeriodAt: b}, false},
		{"a later one (a choice changed)", Last{Found: true, PeriodAt: b.Add(time.Hour)}, false},
	} {
		if got := Due(b, c.last); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSubjectLine: the numbers, in words.
func TestSubjectLine(t *testing.T) {
	for _, c := range []struct {
		d    Digest
		want string
	}{
		{Digest{Needs: 3, Finished: 5}, "Ballet digest — 3 need you, 5 done"},
		{Digest{Needs: 1, Failures: 2}, "Ballet digest — 1 needs you, 2 failed or stuck"},
		{Digest{Needs: 100, NeedsTruncated: true}, "Ballet digest — 100+ need you"},
		{Digest{Finished: 1}, "Ballet digest — 1 done"},
		{Digest{}, "Ballet digest — nothing new"},
	} {
		if got := SubjectLine(c.d); got != c.want {
			t.Errorf("%+v: %q, want %q", c.d, got, c.want)
		}
	}
}
