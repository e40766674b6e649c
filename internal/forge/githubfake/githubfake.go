// Package githubfake is a GitHub REST API of Ballet's own for tests: an
// httptest server on 127.0.0.1 serving the calls the merge stage makes,
// with the behaviour GitHub documents for them (REST API version
// 2022-11-28), so that the GitHub client is tested against what GitHub
// does rather than against what the client expects.
//
// Reproduced, route by route (GitHub's documentation, "REST API endpoints
// for …"):
//
//   - GET /repos/{o}/{r}/branches/{branch}: 200 with the head commit, 404
//     "Branch not found". A branch name may hold '/', escaped or not.
//   - GET /repos/{o}/{r}/pulls?head=owner:branch&base=&state=open|closed|all:
//     newest first, paginated (per_page ≤ 100, a Link header with
//     rel="next"); a list item has merged_at but no merged or mergeable
//     field, as on GitHub.
//   - POST /repos/{o}/{r}/pulls: 201; 422 "Validation Failed" with
//     errors [{resource PullRequest, code custom, message "A pull request
//     already exists for owner:branch."}] when an open one exists for the
//     head and base, {field head, code invalid} when the head branch does not
//     exist, {field base, code invalid} for a missing base, and code custom
//     "No commits between base and head" when the head adds nothing.
//   - GET /repos/{o}/{r}/pulls/{n}: mergeable null and mergeable_state
//     "unknown" on the first read(s) after the pull request is opened or its
//     head or base moves (GitHub computes it in the background), then true,
//     or false with mergeable_state "dirty" for a conflict (SetConflict);
//     SetMergeableState sets blocked, behind, unstable….
//   - PATCH /repos/{o}/{r}/pulls/{n} {state}: closes or reopens; 422 on a
//     merged pull request.
//   - GET /repos/{o}/{r}/commits/{ref}/status: the combined status, the
//     latest status per context, state failure (a failure or error), pending
//     (a pending one, or none at all: total_count 0), else success.
//   - GET /repos/{o}/{r}/commits/{ref}/check-runs: check runs with status
//     queued, in_progress, completed and a conclusion (GitHub Actions reports
//     only here, never as a status).
//   - GET /repos/{o}/{r}/pulls/{n}/reviews: chronological, with
//     author_association and state APPROVED, CHANGES_REQUESTED, COMMENTED,
//     DISMISSED (a dismissed review changes its state; it is not a new one).
//   - PUT /repos/{o}/{r}/pulls/{n}/merge {merge_method, sha}: 200 {merged
//     true, sha}; 409 "Head branch was modified" when sha is not the head;
//     405 "Pull Request is not mergeable" for a conflict, a blocked or behind
//     state, a closed or already merged pull request; 404 for none. A merge
//     moves the base branch, so other pull requests recompute mergeability.
//   - GET /repos/{o}/{r}/pulls/{n}/merge: 204 merged, 404 not.
//   - Deleting a head branch closes its open pull requests.
//   - Authentication: "Authorization: Bearer <token>" (or "token <token>");
//     401 "Bad credentials" otherwise.
//   - Rate limits on demand (RateLimit): 429 or 403 with
//     X-RateLimit-Remaining: 0 and X-RateLimit-Reset (primary), or 403 with
//     Retry-After (secondary); every other answer carries
//     X-RateLimit-Remaining > 0 and a Reset too, as GitHub's do.
//   - A 5xx on demand (Fail).
//
// Not reproduced: repositories' settings (allowed merge methods), forks,
// draft pull requests, GraphQL, webhooks. Already merged answering 405 is
// what clients observe, not a documented promise.
//
// Calls counts requests per route (the pattern, such as "GET
// /repos/{owner}/{repo}/pulls"), for the figure "forge calls per merged
// ticket".
package githubfake

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

// Options configure a Server.
type Options struct {
	Token string      // the one token accepted; "" accepts any Bearer token
	Clock clock.Clock // timestamps and rate-limit headers; clock.Real when nil
	// NullReads is how many reads of a pull request answer mergeable null
	// after it is opened or its head or base moves; 1 when 0, none when < 0.
	NullReads int
}

// Server is a fake GitHub. Its methods are safe for concurrent use.
type Server struct {
	URL string // the API base, for forge.Repo.APIURL

	srv       *httptest.Server
	token     string
	clock     clock.Clock
	nullReads int

	mu     sync.Mutex
	repos  map[string]*repo
	calls  map[string]int
	limits []limit
	fails  []int
}

type repo struct {
	owner, name string
	branches    map[string]string // name → head sha
	pulls       []*pull           // by number-1
	statuses    map[string][]Status
	checkRuns   map[string][]CheckRun
}

type pull struct {
	Number         int
	Title, Body    string
	Head, Base     string // branch names
	HeadSHA        string // the head when it was last pushed (kept after deletion)
	State          string // open or closed
	Merged         bool
	MergedSHA      string // the head commit that was merged
	MergeCommitSHA string
	Merges         int // successful merge calls: more than 1 is a double merge
	Conflict       bool
	MergeableState string // "" = computed: clean or dirty
	nullLeft       int
	Created        time.Time
	MergedAt       time.Time
	ClosedAt       time.Time
	User           string
	reviews        []*Review
}

// Status is a commit status (POST /repos/{o}/{r}/statuses/{sha}).
type Status struct {
	Context string `json:"context"`
	State   string `json:"state"` // error, failure, pending, success
}

// CheckRun is a check run of a commit.
type CheckRun struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Status     string `json:"status"`     // queued, in_progress, completed
	Conclusion string `json:"conclusion"` // when completed: success, failure, neutral, cancelled, skipped, timed_out, action_required, startup_failure
	HeadSHA    string `json:"head_sha"`
}

// Review is a pull request review.
type Review struct {
	ID                int64  `json:"id"`
	User              string `json:"-"`
	Body              string `json:"body"`
	State             string `json:"state"` // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	AuthorAssociation string `json:"author_association"`
	CommitID          string `json:"commit_id"`
	submitted         time.Time
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

// New starts a fake GitHub on 127.0.0.1; Close stops it.
func New(o Options) *Server {
	s := &Server{token: o.Token, clock: o.Clock, nullReads: o.NullReads, repos: map[string]*repo{}, calls: map[string]int{}}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	switch {
	case s.nullReads == 0:
		s.nullReads = 1
	case s.nullReads < 0:
		s.nullReads = 0
	}
	mux := http.NewServeMux()
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /repos/{owner}/{repo}/branches/{branch...}":     s.getBranch,
		"GET /repos/{owner}/{repo}/pulls":                    s.listPulls,
		"POST /repos/{owner}/{repo}/pulls":                   s.createPull,
		"GET /repos/{owner}/{repo}/pulls/{number}":           s.getPull,
		"PATCH /repos/{owner}/{repo}/pulls/{number}":         s.editPull,
		"GET /repos/{owner}/{repo}/pulls/{number}/reviews":   s.listReviews,
		"GET /repos/{owner}/{repo}/pulls/{number}/merge":     s.isMerged,
		"PUT /repos/{owner}/{repo}/pulls/{number}/merge":     s.merge,
		"GET /repos/{owner}/{repo}/commits/{ref}/status":     s.combinedStatus,
		"GET /repos/{owner}/{repo}/commits/{ref}/check-runs": s.checkRuns,
	} {
		mux.Handle(pattern, s.guard(h))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.count(r.Method + " (unknown)")
		writeError(w, http.StatusNotFound, "Not Found")
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/"
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SHA returns a commit id made from seed, for tests that push.
func SHA(seed string) string {
	h := sha1.Sum([]byte(seed))
	return hex.EncodeToString(h[:])
}

// AddRepo creates owner/name with its default branch at a commit.
func (s *Server) AddRepo(owner, name, defaultBranch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[owner+"/"+name] = &repo{
		owner: owner, name: name,
		branches:  map[string]string{defaultBranch: SHA(owner + "/" + name + "@" + defaultBranch)},
		statuses:  map[string][]Status{},
		checkRuns: map[string][]CheckRun{},
	}
}

// Push sets branch's head to sha (creating the branch), as a git push
// would. Open pull requests whose head or base it is recompute their
// mergeability.
func (s *Server) Push(owner, name, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	r.branches[branch] = sha
	for _, p := range r.pulls {
		if p.State != "open" {
			continue
		}
		if p.Head == branch {
			p.HeadSHA = sha
			p.nullLeft = s.nullReads
		}
		if p.Base == branch {
			p.nullLeft = s.nullReads
		}
	}
}

// Branch returns branch's head commit.
func (s *Server) Branch(owner, name, branch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha, ok := s.repo(owner, name).branches[branch]
	return sha, ok
}

// DeleteBranch deletes branch; GitHub closes the open pull requests whose
// head it was.
func (s *Server) DeleteBranch(owner, name, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	delete(r.branches, branch)
	for _, p := range r.pulls {
		if p.State == "open" && p.Head == branch {
			p.State, p.ClosedAt = "closed", s.clock.Now()
		}
	}
}

// OpenPullRequest opens a pull request as a person would, and returns its
// number. It panics when the branches do not exist: a test's mistake.
func (s *Server) OpenPullRequest(owner, name, head, base, title, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	sha, ok := r.branches[head]
	if _, okBase := r.branches[base]; !ok || !okBase {
		panic(fmt.Sprintf("githubfake: OpenPullRequest: %s or %s is not a branch of %s/%s", head, base, owner, name))
	}
	return s.open(r, head, base, sha, title, body, "a-person").Number
}

func (s *Server) open(r *repo, head, base, sha, title, body, user string) *pull {
	p := &pull{
		Number: len(r.pulls) + 1, Title: title, Body: body, Head: head, Base: base, HeadSHA: sha,
		State: "open", nullLeft: s.nullReads, Created: s.clock.Now(), User: user,
	}
	r.pulls = append(r.pulls, p)
	return p
}

// MergeByHand merges pull request n as a person on GitHub would.
func (s *Server) MergeByHand(owner, name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	s.doMerge(r, s.pull(r, n))
}

// ClosePullRequest closes pull request n without merging.
func (s *Server) ClosePullRequest(owner, name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(s.repo(owner, name), n)
	p.State, p.ClosedAt = "closed", s.clock.Now()
}

// SetConflict makes pull request n conflict with its base (mergeable
// false, mergeable_state dirty) or not.
func (s *Server) SetConflict(owner, name string, n int, conflict bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pull(s.repo(owner, name), n).Conflict = conflict
}

// SetMergeableState sets the mergeable_state pull request n reports once
// computed (blocked, behind, unstable, has_hooks…); "" reports clean or
// dirty. blocked and behind make a merge answer 405, as branch protection
// does.
func (s *Server) SetMergeableState(owner, name string, n int, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pull(s.repo(owner, name), n).MergeableState = state
}

// SetStatus sets the commit status context of sha to state (error,
// failure, pending, success), replacing the context's earlier one.
func (s *Server) SetStatus(owner, name, sha, context, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	st := slices.DeleteFunc(r.statuses[sha], func(x Status) bool { return x.Context == context })
	r.statuses[sha] = append(st, Status{Context: context, State: state})
}

// SetCheckRun creates or updates the check run name of sha.
func (s *Server) SetCheckRun(owner, name, sha, run, status, conclusion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	for i, c := range r.checkRuns[sha] {
		if c.Name == run {
			r.checkRuns[sha][i].Status, r.checkRuns[sha][i].Conclusion = status, conclusion
			return
		}
	}
	id := int64(1)
	for _, cs := range r.checkRuns {
		id += int64(len(cs))
	}
	r.checkRuns[sha] = append(r.checkRuns[sha], CheckRun{ID: id, Name: run, Status: status, Conclusion: conclusion, HeadSHA: sha})
}

// AddReview submits a review of pull request n by user, whose
// author_association (OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE…) is
// association, with state APPROVED, CHANGES_REQUESTED or COMMENTED. It
// returns the review's id.
func (s *Server) AddReview(owner, name string, n int, user, association, state, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(s.repo(owner, name), n)
	id := int64(n*1000 + len(p.reviews) + 1)
	p.reviews = append(p.reviews, &Review{ID: id, User: user, Body: body, State: state, AuthorAssociation: association, CommitID: p.HeadSHA, submitted: s.clock.Now()})
	return id
}

// DismissReview dismisses review id of pull request n: its state becomes
// DISMISSED.
func (s *Server) DismissReview(owner, name string, n int, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rv := range s.pull(s.repo(owner, name), n).reviews {
		if rv.ID == id {
			rv.State = "DISMISSED"
		}
	}
}

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

// PullRequest is a pull request as the fake holds it, for assertions.
type PullRequest struct {
	Number         int
	Title, Body    string
	Head, Base     string
	HeadSHA        string
	Open, Merged   bool
	MergedSHA      string // the head commit that was merged
	Merges         int    // successful merges: more than 1 is a double merge
	MergeCommitSHA string
}

// PullRequests returns owner/name's pull requests, by number.
func (s *Server) PullRequests(owner, name string) []PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PullRequest
	for _, p := range s.repo(owner, name).pulls {
		out = append(out, PullRequest{
			Number: p.Number, Title: p.Title, Body: p.Body, Head: p.Head, Base: p.Base, HeadSHA: p.HeadSHA,
			Open: p.State == "open", Merged: p.Merged, MergedSHA: p.MergedSHA, Merges: p.Merges, MergeCommitSHA: p.MergeCommitSHA,
		})
	}
	return out
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

// repo and pull panic on a test's mistake (an unknown repository or pull
// request given to a test method); callers hold mu.
func (s *Server) repo(owner, name string) *repo {
	r, ok := s.repos[owner+"/"+name]
	if !ok {
		panic(fmt.Sprintf("githubfake: no repository %s/%s: call AddRepo first", owner, name))
	}
	return r
}

func (s *Server) pull(r *repo, n int) *pull {
	if n < 1 || n > len(r.pulls) {
		panic(fmt.Sprintf("githubfake: %s/%s has no pull request %d", r.owner, r.name, n))
	}
	return r.pulls[n-1]
}

// guard counts the call, then answers 401 without the token, or an armed
// failure or rate limit, before h.
func (s *Server) guard(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			tok, ok = strings.CutPrefix(auth, "token ")
		}
		s.mu.Lock()
		s.calls[r.Pattern]++
		authorized := ok && tok != "" && (s.token == "" || tok == s.token)
		var fail int
		var lim *limit
		switch {
		case !authorized:
		case len(s.fails) > 0:
			fail, s.fails = s.fails[0], s.fails[1:]
		case len(s.limits) > 0:
			l := s.limits[0]
			lim, s.limits = &l, s.limits[1:]
		}
		s.mu.Unlock()
		if !authorized {
			writeError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		now := s.clock.Now()
		if fail != 0 {
			writeError(w, fail, http.StatusText(fail))
			return
		}
		if lim != nil {
			s.rateLimited(w, *lim, now)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))
		h(w, r)
	})
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

func (s *Server) getBranch(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, ok := s.lookup(w, req, false)
	if !ok {
		return
	}
	name := req.PathValue("branch")
	sha, ok := r.branches[name]
	if !ok {
		writeError(w, http.StatusNotFound, "Branch not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "commit": map[string]any{"sha": sha}, "protected": false})
}

func (s *Server) listPulls(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, ok := s.lookup(w, req, false)
	if !ok {
		return
	}
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
		return
	}
	var out []map[string]any
	for i := len(r.pulls) - 1; i >= 0; i-- { // newest first
		p := r.pulls[i]
		if (state != "all" && p.State != state) ||
			(q.Get("base") != "" && p.Base != q.Get("base")) ||
			(q.Get("head") != "" && q.Get("head") != r.owner+":"+p.Head) {
			continue
		}
		out = append(out, s.pullJSON(r, p, false))
	}
	writePage(w, req, out)
}

func (s *Server) createPull(w http.ResponseWriter, req *http.Request) {
	var in struct {
		Title, Head, Base, Body string
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, ok := s.lookup(w, req, false)
	if !ok {
		return
	}
	head := in.Head
	if o, b, found := strings.Cut(in.Head, ":"); found {
		if o != r.owner {
			writeValidation(w, map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"})
			return
		}
		head = b
	}
	switch {
	case in.Title == "":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "title", "code": "missing_field"})
		return
	case r.branches[in.Base] == "":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"})
		return
	case r.branches[head] == "":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"})
		return
	}
	for _, p := range r.pulls {
		if p.State == "open" && p.Head == head && p.Base == in.Base {
			writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom",
				"message": fmt.Sprintf("A pull request already exists for %s:%s.", r.owner, head)})
			return
		}
	}
	if r.branches[head] == r.branches[in.Base] {
		writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom",
			"message": fmt.Sprintf("No commits between %s and %s", in.Base, head)})
		return
	}
	p := s.open(r, head, in.Base, r.branches[head], in.Title, in.Body, "ballet")
	writeJSON(w, http.StatusCreated, s.pullJSON(r, p, true))
}

func (s *Server) getPull(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, p, ok := s.lookup(w, req, true)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.pullJSON(r, p, true))
	if p.nullLeft > 0 {
		p.nullLeft--
	}
}

func (s *Server) editPull(w http.ResponseWriter, req *http.Request) {
	var in struct {
		State *string `json:"state"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, p, ok := s.lookup(w, req, true)
	if !ok {
		return
	}
	if in.State != nil {
		switch {
		case *in.State != "open" && *in.State != "closed":
			writeValidation(w, map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
			return
		case p.Merged && *in.State != "closed":
			writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom", "message": "Cannot reopen a merged pull request"})
			return
		case p.Merged:
			writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom", "message": "Cannot close a merged pull request"})
			return
		case *in.State == "closed" && p.State == "open":
			p.State, p.ClosedAt = "closed", s.clock.Now()
		case *in.State == "open" && p.State == "closed":
			p.State, p.ClosedAt = "open", time.Time{}
			p.nullLeft = s.nullReads
		}
	}
	writeJSON(w, http.StatusOK, s.pullJSON(r, p, true))
}

func (s *Server) listReviews(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, p, ok := s.lookup(w, req, true)
	if !ok {
		return
	}
	out := make([]map[string]any, 0, len(p.reviews))
	for _, rv := range p.reviews {
		out = append(out, map[string]any{
			"id": rv.ID, "user": map[string]any{"login": rv.User}, "body": rv.Body, "state": rv.State,
			"author_association": rv.AuthorAssociation, "commit_id": rv.CommitID,
			"submitted_at": rv.submitted.UTC().Format(time.RFC3339),
		})
	}
	writePage(w, req, out)
}

func (s *Server) isMerged(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, p, ok := s.lookup(w, req, true)
	if !ok {
		return
	}
	if !p.Merged {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) merge(w http.ResponseWriter, req *http.Request) {
	var in struct {
		SHA         string `json:"sha"`
		MergeMethod string `json:"merge_method"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, p, ok := s.lookup(w, req, true)
	if !ok {
		return
	}
	switch {
	case in.MergeMethod != "" && in.MergeMethod != "merge" && in.MergeMethod != "squash" && in.MergeMethod != "rebase":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "merge_method", "code": "invalid"})
		return
	case p.Merged || p.State != "open":
		writeError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	case in.SHA != "" && in.SHA != p.HeadSHA:
		writeError(w, http.StatusConflict, "Head branch was modified. Review and try the merge again.")
		return
	case p.Conflict || p.MergeableState == "blocked" || p.MergeableState == "behind" || p.MergeableState == "draft":
		writeError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	}
	s.doMerge(r, p)
	writeJSON(w, http.StatusOK, map[string]any{"sha": p.MergeCommitSHA, "merged": true, "message": "Pull Request successfully merged"})
}

// doMerge merges p: the base moves to a merge commit. Callers hold mu.
func (s *Server) doMerge(r *repo, p *pull) {
	p.Merged, p.MergedSHA, p.State = true, p.HeadSHA, "closed"
	p.Merges++
	p.MergedAt, p.ClosedAt = s.clock.Now(), s.clock.Now()
	p.MergeCommitSHA = SHA("merge " + r.branches[p.Base] + " " + p.HeadSHA)
	r.branches[p.Base] = p.MergeCommitSHA
	for _, o := range r.pulls {
		if o.State == "open" && o.Base == p.Base {
			o.nullLeft = s.nullReads
		}
	}
}

func (s *Server) combinedStatus(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, ok := s.lookup(w, req, false)
	if !ok {
		return
	}
	sha := resolve(r, req.PathValue("ref"))
	statuses := r.statuses[sha]
	state := "success"
	if len(statuses) == 0 {
		state = "pending"
	}
	for _, st := range statuses {
		switch {
		case st.State == "failure" || st.State == "error":
			state = "failure"
		case st.State == "pending" && state != "failure":
			state = "pending"
		}
	}
	items := make([]map[string]any, 0, len(statuses))
	for _, st := range statuses {
		items = append(items, map[string]any{"context": st.Context, "state": st.State})
	}
	page, link := paginate(req, items)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(statuses), "statuses": page})
}

func (s *Server) checkRuns(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, ok := s.lookup(w, req, false)
	if !ok {
		return
	}
	sha := resolve(r, req.PathValue("ref"))
	runs := r.checkRuns[sha]
	items := make([]map[string]any, 0, len(runs))
	for _, c := range runs {
		m := map[string]any{"id": c.ID, "name": c.Name, "status": c.Status, "conclusion": nil, "head_sha": c.HeadSHA}
		if c.Status == "completed" {
			m["conclusion"] = c.Conclusion
		}
		items = append(items, m)
	}
	page, link := paginate(req, items)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": page})
}

// resolve turns a ref (a branch name or a commit id) into a commit id.
func resolve(r *repo, ref string) string {
	if sha, ok := r.branches[ref]; ok {
		return sha
	}
	return ref
}

func (s *Server) pullJSON(r *repo, p *pull, full bool) map[string]any {
	ts := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.UTC().Format(time.RFC3339)
	}
	m := map[string]any{
		"number":     p.Number,
		"url":        fmt.Sprintf("%srepos/%s/%s/pulls/%d", s.URL, r.owner, r.name, p.Number),
		"html_url":   fmt.Sprintf("https://github.example/%s/%s/pull/%d", r.owner, r.name, p.Number),
		"state":      p.State,
		"title":      p.Title,
		"body":       p.Body,
		"user":       map[string]any{"login": p.User},
		"created_at": ts(p.Created),
		"closed_at":  ts(p.ClosedAt),
		"merged_at":  ts(p.MergedAt),
		"head": map[string]any{"ref": p.Head, "sha": p.HeadSHA, "label": r.owner + ":" + p.Head,
			"repo": map[string]any{"name": r.name, "full_name": r.owner + "/" + r.name}},
		"base": map[string]any{"ref": p.Base, "sha": r.branches[p.Base], "label": r.owner + ":" + p.Base,
			"repo": map[string]any{"name": r.name, "full_name": r.owner + "/" + r.name}},
		"draft": false,
	}
	if p.Merged {
		m["merge_commit_sha"] = p.MergeCommitSHA
	}
	if !full {
		return m // a list item has no merged or mergeable fields
	}
	m["merged"] = p.Merged
	switch {
	case p.Merged || p.State != "open":
		m["mergeable"], m["mergeable_state"] = nil, "unknown"
	case p.nullLeft > 0:
		m["mergeable"], m["mergeable_state"] = nil, "unknown"
	case p.Conflict:
		m["mergeable"], m["mergeable_state"] = false, "dirty"
	default:
		st := p.MergeableState
		if st == "" {
			st = "clean"
		}
		m["mergeable"], m["mergeable_state"] = true, st
	}
	return m
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
