package forge

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAtForms: every header form GitHub and Gitea send.
func TestRetryAtForms(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
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
