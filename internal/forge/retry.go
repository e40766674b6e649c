package forge

import (
	"net/textproto"
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
//
// h is an http.Header (this package stays free of net/http: an
// http.Header is a map[string][]string), its keys in canonical form.
func RetryAt(h map[string][]string, now time.Time) (at time.Time, ok bool) {
	get := func(key string) string {
		if v := h[textproto.CanonicalMIMEHeaderKey(key)]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	if v := get("Retry-After"); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
			return now.Add(time.Duration(min(secs, maxWait)) * time.Second), true
		}
		if t, ok := httpDate(v); ok {
			return later(t, now), true
		}
	}
	if v := get("X-RateLimit-Reset"); v != "" {
		if epoch, err := strconv.ParseInt(v, 10, 64); err == nil && epoch > 0 {
			return later(time.Unix(min(epoch, now.Unix()+maxWait), 0), now), true
		}
	}
	return time.Time{}, false
}

// maxWait bounds a wait in seconds (a day), so that a forge's nonsense
// header cannot park a job for years or overflow a time.Duration.
const maxWait = 24 * 60 * 60

// httpDate parses an HTTP date in the three forms RFC 9110 accepts.
func httpDate(v string) (time.Time, bool) {
	for _, layout := range []string{"Mon, 02 Jan 2006 15:04:05 GMT", time.RFC850, time.ANSIC} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func later(t, now time.Time) time.Time {
	if t.Before(now) {
		return now
	}
	return t.UTC()
}
