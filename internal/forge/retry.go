package forge

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAt reads when a forge allows calls again from the headers of a
// response that refused a call for its rate limit: Retry-After (seconds, or
// an HTTP date) first, as GitHub's documentation says to honour it before
// anything else, else X-RateLimit-Reset (epoch seconds, GitHub and Gitea).
// ok is false when neither header holds a time. A time before now yields
// now: the limit is already over. Call it only for a refused call: every
// GitHub response carries X-RateLimit-Reset.
func RetryAt(h http.Header, now time.Time) (at time.Time, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
			return now.Add(time.Duration(min(secs, maxWait)) * time.Second), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return later(t, now), true
		}
	}
	if v := strings.TrimSpace(h.Get("X-RateLimit-Reset")); v != "" {
		if epoch, err := strconv.ParseInt(v, 10, 64); err == nil && epoch > 0 {
			return later(time.Unix(min(epoch, now.Unix()+maxWait), 0), now), true
		}
	}
	return time.Time{}, false
}

// maxWait bounds a wait in seconds (a day), so that a forge's nonsense
// header cannot park a job for years or overflow a time.Duration.
const maxWait = 24 * 60 * 60

func later(t, now time.Time) time.Time {
	if t.Before(now) {
		return now
	}
	return t.UTC()
}
