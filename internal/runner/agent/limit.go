package agent

import (
	"strconv"
	"strings"
	"time"
)

// Limit says that the model's provider refused the session: a rate limit,
// an overload or an exhausted quota. Such a session is not the agent's
// failure: it runs again once the limit is over.
type Limit struct {
	// Kind is LimitRate, LimitOverloaded or LimitQuota.
	Kind string
	// Status is the HTTP status of the refusal (0 when the CLI did not
	// tell it).
	Status int
	// After, when > 0, is how long the provider said to wait (its
	// retry-after, or a reset given as a duration).
	After time.Duration
	// At, when set, is when the provider said the limit resets (a reset
	// header's timestamp).
	At time.Time
}

// The kinds of Limit.
const (
	LimitRate       = "rate_limit"
	LimitOverloaded = "overloaded"
	LimitQuota      = "quota"
)

// maxLimitWait bounds how far ahead a provider's reset time is believed:
// a farther one (a misread, a clock gone wrong) is no reset time.
const maxLimitWait = 7 * 24 * time.Hour

// RetryAt is when the limit is over by what the provider said, taking now
// as the time of the refusal; nil when it did not say.
func (l Limit) RetryAt(now time.Time) *time.Time {
	var at time.Time
	switch {
	case l.After > 0:
		at = now.Add(l.After)
	case !l.At.IsZero():
		at = l.At
	default:
		return nil
	}
	if at.Before(now) {
		at = now
	}
	if at.Sub(now) > maxLimitWait {
		return nil
	}
	// To the second, rounded up: never before the provider said.
	if t := at.UTC().Truncate(time.Second); t.Before(at) {
		at = t.Add(time.Second)
	} else {
		at = t
	}
	return &at
}

// Reset reads when a limit is over from a refusal's headers, into l: the
// retry-after-ms or retry-after header (seconds or an HTTP date) first,
// else the latest reset among the exhausted rate limits (remaining 0):
// Anthropic's anthropic-ratelimit-<limit>-reset (RFC 3339) and
// anthropic-ratelimit-unified-reset (Unix seconds), OpenAI's
// x-ratelimit-reset-<limit> (a duration such as 6m0s or 20ms). now is the
// time of the refusal (for an HTTP date). Header names are matched without
// regard to case (opencode prints them in lower case).
func (l *Limit) Reset(h map[string]string, now time.Time) {
	get := func(name string) string {
		for k, v := range h {
			if strings.EqualFold(k, name) {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if v := get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < float64(maxLimitWait/time.Millisecond) {
			l.After = time.Duration(ms * float64(time.Millisecond))
			return
		}
	}
	if v := get("retry-after"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 && s < maxLimitWait.Seconds() {
			l.After = time.Duration(s * float64(time.Second))
			return
		}
		if t, ok := httpDate(v); ok && t.After(now) {
			l.After = t.Sub(now)
			return
		}
	}
	var after time.Duration
	var at time.Time
	for k, v := range h {
		name := strings.ToLower(k)
		switch {
		case name == "anthropic-ratelimit-unified-reset":
			if get("anthropic-ratelimit-unified-status") != "rejected" {
				continue
			}
			if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
				at = later(at, time.Unix(s, 0))
			}
		case strings.HasPrefix(name, "anthropic-ratelimit-") && strings.HasSuffix(name, "-reset"):
			if !exhausted(get(strings.TrimSuffix(name, "-reset") + "-remaining")) {
				continue
			}
			if t, err := time.Parse(time.RFC3339, strings.TrimSpace(v)); err == nil {
				at = later(at, t)
			}
		case strings.HasPrefix(name, "x-ratelimit-reset-"):
			if !exhausted(get("x-ratelimit-remaining-" + strings.TrimPrefix(name, "x-ratelimit-reset-"))) {
				continue
			}
			if d, err := time.ParseDuration(strings.TrimSpace(v)); err == nil && d > after {
				after = d
			}
		}
	}
	if after > 0 && after < maxLimitWait {
		l.After = after
	}
	if !at.IsZero() && l.After == 0 {
		l.At = at
	}
}

// exhausted: a limit's remaining count is 0, or is not told (then its
// reset is believed).
func exhausted(remaining string) bool { return remaining == "" || remaining == "0" }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// httpDate parses an HTTP date (retry-after's other form) in the three
// formats HTTP allows: IMF-fixdate, RFC 850 and asctime.
func httpDate(v string) (time.Time, bool) {
	for _, layout := range []string{"Mon, 02 Jan 2006 15:04:05 GMT", "Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan _2 15:04:05 2006"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// HTTP statuses the providers refuse with (this package speaks no HTTP:
// the runner's meter does).
const (
	statusTooManyRequests    = 429
	statusServiceUnavailable = 503
)

// claudeLimit classifies claude-code's account of an API error: the
// assistant line's error ("rate_limit", "billing_error" …), the
// api_error_status and api_error_type of its assistant and result lines.
// It returns nil for an error that is no provider limit.
func claudeLimit(errKind string, status int, typ string) *Limit {
	switch {
	case errKind == "billing_error":
		return &Limit{Kind: LimitQuota, Status: status}
	case status == statusTooManyRequests || typ == "rate_limit_error" || errKind == "rate_limit":
		return &Limit{Kind: LimitRate, Status: status}
	case status == 529 || typ == "overloaded_error":
		return &Limit{Kind: LimitOverloaded, Status: status}
	}
	return nil
}

// opencodeLimit classifies an opencode error event's API error: its
// status, message and the provider's response body. It returns nil for an
// error that is no provider limit.
func opencodeLimit(status int, message, body string) *Limit {
	text := strings.ToLower(message + " " + body)
	quota := strings.Contains(text, "insufficient_quota") || strings.Contains(text, "exceeded your current quota") ||
		strings.Contains(text, "credit balance is too low")
	switch {
	case quota:
		return &Limit{Kind: LimitQuota, Status: status}
	case status == statusTooManyRequests || strings.Contains(text, "rate_limit_error"):
		return &Limit{Kind: LimitRate, Status: status}
	case status == 529 || strings.Contains(text, "overloaded_error") ||
		(status == statusServiceUnavailable && strings.Contains(text, "overloaded")):
		return &Limit{Kind: LimitOverloaded, Status: status}
	}
	return nil
}
