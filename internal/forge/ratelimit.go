package forge

import (
	"strconv"
	"strings"
	"time"
)

// DefaultRateLimitWait is how long RateLimit waits when a rate-limited
// answer does not say until when.
const DefaultRateLimitWait = time.Minute

// maxRateLimitWait bounds a wait a forge asks for, so that a wrong clock or
// header never parks a job for days.
const maxRateLimitWait = 6 * time.Hour

// Header is what RetryAt reads of an answer's header; http.Header has it
// (this package stays free of net/http).
type Header interface{ Get(key string) string }

// RetryAt reads from a forge's answer when it allows calls again:
// Retry-After (seconds, or an HTTP date), else X-RateLimit-Reset (Unix
// seconds, GitHub and Gitea behind a limiter). ok is false when neither
// header says; a time in the past is now.
func RetryAt(h Header, now time.Time) (until time.Time, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return clampWait(now, now.Add(time.Duration(min(s, int64(maxRateLimitWait/time.Second)))*time.Second)), true
		}
		for _, layout := range httpDates {
			if t, err := time.Parse(layout, v); err == nil {
				return clampWait(now, t), true
			}
		}
	}
	if v := strings.TrimSpace(h.Get("X-RateLimit-Reset")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
			return clampWait(now, time.Unix(s, 0)), true
		}
	}
	return time.Time{}, false
}

// httpDates are the three date forms RFC 9110 accepts in Retry-After.
var httpDates = []string{"Mon, 02 Jan 2006 15:04:05 GMT", time.RFC850, time.ANSIC}

func clampWait(now, t time.Time) time.Time {
	switch {
	case t.Before(now):
		return now
	case t.After(now.Add(maxRateLimitWait)):
		return now.Add(maxRateLimitWait)
	}
	return t
}

// RateLimit returns the error of an answer that refused a call for the
// forge's rate limit — HTTP 429, or 403 with X-RateLimit-Remaining: 0 or a
// Retry-After (GitHub's secondary limit) — with Until from RetryAt (else
// now + DefaultRateLimitWait); nil for any other answer.
func RateLimit(status int, h Header, now time.Time) *RateLimitedError {
	const tooManyRequests, forbidden = 429, 403
	limited := status == tooManyRequests ||
		(status == forbidden && (strings.TrimSpace(h.Get("X-RateLimit-Remaining")) == "0" || h.Get("Retry-After") != ""))
	if !limited {
		return nil
	}
	until, ok := RetryAt(h, now)
	if !ok {
		until = now.Add(DefaultRateLimitWait)
	}
	return &RateLimitedError{Until: until}
}
