package forge

import (
	"net/http"
	"testing"
	"time"
)

func TestRateLimit(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
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
