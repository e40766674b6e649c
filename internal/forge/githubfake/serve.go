package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// handler serves one route past the prologue: r is the request's
// repository and p, on routes with a {number}, its pull request; s.mu is
// held.
type handler func(w http.ResponseWriter, req *http.Request, r *repo, p *pull)

// serve is every route's one prologue: it counts the call, answers 401
// without the token, an armed failure or rate limit, or 404 for an unknown
// repository or pull request, and otherwise runs h under s.mu with the
// rate-limit headers GitHub sends on every answer.
func (s *Server) serve(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		auth := req.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			tok, ok = strings.CutPrefix(auth, "token ")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls[req.Pattern]++
		now := s.clock.Now()
		switch {
		case !ok || tok == "" || (s.token != "" && tok != s.token):
			writeError(w, http.StatusUnauthorized, "Bad credentials")
			return
		case len(s.fails) > 0:
			fail := s.fails[0]
			s.fails = s.fails[1:]
			writeError(w, fail, http.StatusText(fail))
			return
		case len(s.limits) > 0:
			l := s.limits[0]
			s.limits = s.limits[1:]
			s.rateLimited(w, l, now)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))
		r, p, ok := s.lookup(w, req, strings.Contains(req.Pattern, "{number}"))
		if !ok {
			return
		}
		h(w, req, r, p)
	})
}

// decode reads a request's JSON body into in, answering 400 itself when
// it is not JSON.
func decode(w http.ResponseWriter, req *http.Request, in any) bool {
	if err := json.NewDecoder(req.Body).Decode(in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

func (s *Server) rateLimited(w http.ResponseWriter, l limit, now time.Time) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	switch l.kind {
	case Limit429, LimitPrimary:
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(l.until.Unix(), 10))
		status := http.StatusForbidden
		if l.kind == Limit429 {
			status = http.StatusTooManyRequests
		}
		writeJSON(w, status, map[string]string{
			"message":           "API rate limit exceeded for user ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
		})
	case LimitSecondary:
		h.Set("X-RateLimit-Remaining", "4000")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))
		secs := int64(l.until.Sub(now).Seconds() + 0.999)
		h.Set("Retry-After", strconv.FormatInt(max(secs, 0), 10))
		writeJSON(w, http.StatusForbidden, map[string]string{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
		})
	}
}

// lookup finds the request's repository and, with a {number}, its pull
// request, answering 404 itself when either is missing. Callers hold mu.
func (s *Server) lookup(w http.ResponseWriter, req *http.Request, withPull bool) (*repo, *pull, bool) {
	r, ok := s.repos[req.PathValue("owner")+"/"+req.PathValue("repo")]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil, false
	}
	if !withPull {
		return r, nil, true
	}
	n, err := strconv.Atoi(req.PathValue("number"))
	if err != nil || n < 1 || n > len(r.pulls) {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil, false
	}
	return r, r.pulls[n-1], true
}

// paginate cuts items to the request's page (per_page ≤ 100, 30 by
// default) and returns the Link header GitHub sends with it.
func paginate[T any](req *http.Request, items []T) ([]T, string) {
	q := req.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per < 1 {
		per = 30
	}
	per = min(per, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	from := min((page-1)*per, len(items))
	to := min(from+per, len(items))
	out := items[from:to]
	if out == nil {
		out = []T{}
	}
	if to >= len(items) {
		return out, ""
	}
	next := *req.URL
	next.Scheme, next.Host = "http", req.Host
	nq := url.Values{}
	for k, v := range q {
		nq[k] = v
	}
	nq.Set("page", strconv.Itoa(page+1))
	nq.Set("per_page", strconv.Itoa(per))
	next.RawQuery = nq.Encode()
	last := (len(items) + per - 1) / per
	nq.Set("page", strconv.Itoa(last))
	lastURL := next
	lastURL.RawQuery = nq.Encode()
	return out, fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, next.String(), lastURL.String())
}

func writePage(w http.ResponseWriter, req *http.Request, items []map[string]any) {
	page, link := paginate(req, items)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, page)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func writeValidation(w http.ResponseWriter, e map[string]any) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message": "Validation Failed", "errors": []map[string]any{e},
		"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
	})
}

type limit struct {
	kind  RateLimitKind
	until time.Time
}

// RateLimitKind is how the fake refuses a call for its rate limit.
type RateLimitKind int

// The rate-limit answers GitHub documents.
const (
	Limit429       RateLimitKind = iota // 429 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset
	LimitPrimary                        // 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset
	LimitSecondary                      // 403 with Retry-After (a secondary rate limit)
)

// RateLimit makes the next n requests answer as rate limited until until.
func (s *Server) RateLimit(kind RateLimitKind, until time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.limits = append(s.limits, limit{kind, until})
	}
}

// Fail makes the next n requests answer status (a 5xx) without doing
// anything.
func (s *Server) Fail(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails = append(s.fails, status)
	}
}

// Calls returns the number of requests per route pattern ("GET
// /repos/{owner}/{repo}/pulls"), rate-limited and failed ones included.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// TotalCalls returns the number of requests served.
func (s *Server) TotalCalls() int {
	n := 0
	for _, v := range s.Calls() {
		n += v
	}
	return n
}

// ResetCalls sets every count to zero.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
}

func (s *Server) count(route string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[route]++
}
