package forge

import (
	"net/http"
	"testing"
	"time"
)

// h is a header of the given key, value pairs.
func h(kv ...string) http.Header {
	out := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func TestRateLimit(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status int
		h      http.Header
		want   time.Time // zero: not rate limited
	}{
		{"429 Retry-After seconds", 429, h("Retry-After", "30"), now.Add(30 * time.Second)},
		{"429 Retry-After date", 429, h("Retry-After", now.Add(2*time.Minute).Format(http.TimeFormat)), now.Add(2 * time.Minute)},
		{"429 reset", 429, h("X-RateLimit-Reset", "1796126400"), time.Unix(1796126400, 0)},
		{"429 Retry-After wins over reset", 429, h("Retry-After", "5", "X-RateLimit-Reset", "1796126400"), now.Add(5 * time.Second)},
		{"429 nothing said", 429, h(), now.Add(DefaultRateLimitWait)},
		{"429 garbage", 429, h("Retry-After", "soon", "X-RateLimit-Reset", "-3"), now.Add(DefaultRateLimitWait)},
		{"429 in the past", 429, h("X-RateLimit-Reset", "1000"), now},
		{"429 too far", 429, h("Retry-After", "99999999999"), now.Add(maxRateLimitWait)},
		{"403 remaining 0", 403, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796126400"), time.Unix(1796126400, 0)},
		{"403 secondary limit", 403, h("Retry-After", "60"), now.Add(time.Minute)},
		{"403 forbidden", 403, h("X-RateLimit-Remaining", "12"), time.Time{}},
		{"200 with headers", 200, h("X-RateLimit-Remaining", "0"), time.Time{}},
		{"503 Retry-After", 503, h("Retry-After", "10"), time.Time{}},
	} {
		got := RateLimit(c.status, c.h, now)
		switch {
		case c.want.IsZero() && got != nil:
			t.Errorf("%s: %v, want not rate limited", c.name, got)
		case !c.want.IsZero() && (got == nil || !got.Until.Equal(c.want)):
			t.Errorf("%s: %v, want until %s", c.name, got, c.want)
		}
	}
}

// TestRetryAtForms: every header form GitHub and Gitea send.
func TestRetryAtForms(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	reset := now.Add(10 * time.Minute)
	tests := []struct {
		name   string
		header http.Header
		want   time.Time
		ok     bool
	}{
		{"none", h(), time.Time{}, false},
		{"retry-after seconds", h("Retry-After", "60"), now.Add(time.Minute), true},
		{"retry-after zero", h("Retry-After", "0"), now, true},
		{"retry-after date", h("Retry-After", reset.Format(http.TimeFormat)), reset, true},
		{"retry-after RFC 850 date", h("Retry-After", reset.Format(time.RFC850)), reset, true},
		{"retry-after ANSI C date", h("Retry-After", reset.Format(time.ANSIC)), reset, true},
		{"retry-after date in the past", h("Retry-After", now.Add(-time.Hour).Format(http.TimeFormat)), now, true},
		{"retry-after wins over reset", h("Retry-After", "30", "X-RateLimit-Reset", "1"), now.Add(30 * time.Second), true},
		{"reset epoch", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1777637400"), time.Unix(1777637400, 0).UTC(), true},
		{"reset in the past", h("X-RateLimit-Reset", "1000"), now, true},
		{"garbage retry-after falls back to reset", h("Retry-After", "soon", "X-RateLimit-Reset", "1777637400"), time.Unix(1777637400, 0).UTC(), true},
		{"negative retry-after", h("Retry-After", "-5"), time.Time{}, false},
		{"garbage reset", h("X-RateLimit-Reset", "tomorrow"), time.Time{}, false},
		{"huge retry-after is bounded", h("Retry-After", "99999999999999999"), now.Add(maxRateLimitWait), true},
		{"huge reset is bounded", h("X-RateLimit-Reset", "99999999999999"), now.Add(maxRateLimitWait), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RetryAt(tt.header, now)
			if ok != tt.ok || !got.Equal(tt.want) {
				t.Fatalf("RetryAt = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
