package fakemodel

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// limits are the provider limits the rate-limit scenario plays: one per
// marker (its parameters), shared by every session that carries it, as a
// real provider's limit is shared by every request on one credential.
type limits struct {
	mu sync.Mutex
	m  map[string]*limit
}

// limit is one marker's limit: when it first refused and how many times.
type limit struct {
	first   time.Time
	refused int
}

// refuse tells whether the request at now is refused by the limit key,
// which lasts requests refusals (0: no bound) and span since the first
// (0: no bound), and counts the refusal.
func (l *limits) refuse(key string, now time.Time, requests int, span time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*limit{}
	}
	lim, ok := l.m[key]
	if !ok {
		lim = &limit{first: now}
		l.m[key] = lim
	}
	if requests > 0 && lim.refused >= requests {
		return false
	}
	if span > 0 && !now.Before(lim.first.Add(span)) {
		return false
	}
	lim.refused++
	return true
}

// limitKey is the key of a marker's limit: its parameters, sorted.
func limitKey(params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s ", k, params[k])
	}
	return b.String()
}

// rateLimit refuses the request as the provider's limit would, in each
// API's own words, until the limit is over; then it plays the then=
// scenario.
func rateLimit(c *Conversation) (Turn, error) {
	requests, err := intParam(c, "requests", 0)
	if err != nil {
		return Turn{}, err
	}
	var span time.Duration
	if v := c.Param("for", ""); v != "" {
		if span, err = time.ParseDuration(v); err != nil || span <= 0 {
			return Turn{}, fmt.Errorf("marker parameter for=%q is not a positive duration (90s, 2m …)", v)
		}
	}
	retryAfter, err := intParam(c, "retry_after", -1)
	if err != nil {
		return Turn{}, err
	}
	reset, err := intParam(c, "reset", -1)
	if err != nil {
		return Turn{}, err
	}
	from, err := intParam(c, "from", 0)
	if err != nil {
		return Turn{}, err
	}
	then := c.Param("then", DefaultScenario)
	next, ok := Scenarios()[then]
	if !ok || then == "rate-limit" {
		return Turn{}, fmt.Errorf("marker parameter then=%q is not a scenario to play after the limit", then)
	}
	kind := c.Param("kind", "rate")
	f, err := limitFailure(c.api, kind, c.Model)
	if err != nil {
		return Turn{}, err
	}
	if c.Step() < from || c.limits == nil || !c.limits.refuse(limitKey(c.Params), c.now, requests, span) {
		return next.Next(c)
	}
	f.Headers = limitHeaders(c.api, c.now, retryAfter, reset)
	if claim := c.Param("claim", ""); claim != "" && c.api == "anthropic" && reset >= 0 {
		// A subscription's limit (claude.ai plans): claude-code reads
		// these unified headers and says when the limit resets.
		h := f.Headers
		h["Anthropic-Ratelimit-Unified-Status"], h["Anthropic-Ratelimit-Unified-Representative-Claim"] = "rejected", claim
		h["Anthropic-Ratelimit-Unified-Reset"] = strconv.FormatInt(c.now.Add(time.Duration(reset)*time.Second).Unix(), 10)
	}
	return Turn{Fail: &f}, nil
}

// limitFailure is how each API refuses for its limits: a rate limit, an
// overload, an exhausted quota (the status, the error's type, code and
// message the real API sends).
func limitFailure(api, kind, model string) (Failure, error) {
	switch {
	case kind == "rate" && api == "openai":
		return Failure{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded",
			Message: "Rate limit reached for " + model + " in organization org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. (fake model)"}, nil
	case kind == "rate":
		return Failure{Status: http.StatusTooManyRequests, Type: "rate_limit_error",
			Message: "This request would exceed the rate limit for your organization of 50 requests per minute. (fake model)"}, nil
	case kind == "overloaded" && api == "openai":
		return Failure{Status: http.StatusServiceUnavailable, Type: "server_error",
			Message: "The server is overloaded or not ready yet. (fake model)"}, nil
	case kind == "overloaded":
		return Failure{Status: 529, Type: "overloaded_error", Message: "Overloaded (fake model)"}, nil
	case kind == "quota" && api == "openai":
		return Failure{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "insufficient_quota",
			Message: "You exceeded your current quota, please check your plan and billing details. (fake model)"}, nil
	case kind == "quota":
		return Failure{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits. (fake model)"}, nil
	}
	return Failure{}, fmt.Errorf("marker parameter kind=%q is not rate, overloaded or quota", kind)
}

// limitHeaders are the headers of a refusal: retry-after (seconds, when
// retryAfter ≥ 0) and the limits' reset times reset seconds from now
// (when ≥ 0) in the API's own headers: Anthropic's
// anthropic-ratelimit-*-reset (RFC 3339), OpenAI's x-ratelimit-reset-*
// (a duration such as 6m0s).
func limitHeaders(api string, now time.Time, retryAfter, reset int) map[string]string {
	h := map[string]string{}
	if retryAfter >= 0 {
		h["Retry-After"] = strconv.Itoa(retryAfter)
	}
	if reset >= 0 {
		if api == "openai" {
			d := (time.Duration(reset) * time.Second).String()
			h["X-Ratelimit-Limit-Requests"], h["X-Ratelimit-Remaining-Requests"], h["X-Ratelimit-Reset-Requests"] = "3", "0", d
			h["X-Ratelimit-Limit-Tokens"], h["X-Ratelimit-Remaining-Tokens"], h["X-Ratelimit-Reset-Tokens"] = "40000", "40000", "0s"
		} else {
			at := now.Add(time.Duration(reset) * time.Second).UTC().Format(time.RFC3339)
			h["Anthropic-Ratelimit-Requests-Limit"], h["Anthropic-Ratelimit-Requests-Remaining"], h["Anthropic-Ratelimit-Requests-Reset"] = "50", "0", at
			h["Anthropic-Ratelimit-Tokens-Limit"], h["Anthropic-Ratelimit-Tokens-Remaining"], h["Anthropic-Ratelimit-Tokens-Reset"] = "40000", "40000", now.UTC().Format(time.RFC3339)
		}
	}
	return h
}
