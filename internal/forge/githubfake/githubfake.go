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
//   - GET /repos/{o}/{r}/compare/{base}...{head}: the commits and files of
//     the head against the base (commits.go: CommitFile writes files).
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
// Files by resource, each with its routes and the test methods that act
// on it: branches.go, pulls.go, reviews.go, checks.go (statuses and check
// runs), merge.go, commits.go (commits and the compare); serve.go is every route's one prologue (credentials,
// call counts, armed failures and rate limits, the repository and pull
// request looked up) and the answers' shapes (pages, errors).
//
// Calls counts requests per route (the pattern, such as "GET
// /repos/{owner}/{repo}/pulls"), for the figure "forge calls per merged
// ticket".
package githubfake

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

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
	protections map[string]Protection // by branch

	defaultBranch string
	commits       map[string]*commit // commits.go
	seq           int
}

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
	for pattern, h := range map[string]handler{
		"GET /repos/{owner}/{repo}/branches/{branch...}":     s.getBranch,      // branches.go
		"GET /repos/{owner}/{repo}/pulls":                    s.listPulls,      // pulls.go
		"POST /repos/{owner}/{repo}/pulls":                   s.createPull,     //
		"GET /repos/{owner}/{repo}/pulls/{number}":           s.getPull,        //
		"PATCH /repos/{owner}/{repo}/pulls/{number}":         s.editPull,       //
		"GET /repos/{owner}/{repo}/pulls/{number}/reviews":   s.listReviews,    // reviews.go
		"GET /repos/{owner}/{repo}/pulls/{number}/merge":     s.isMerged,       // merge.go
		"PUT /repos/{owner}/{repo}/pulls/{number}/merge":     s.merge,          //
		"GET /repos/{owner}/{repo}/commits/{ref}/status":     s.combinedStatus, // checks.go
		"GET /repos/{owner}/{repo}/commits/{ref}/check-runs": s.checkRuns,      //
		"GET /repos/{owner}/{repo}/compare/{basehead...}":    s.compare,        // commits.go
	} {
		mux.Handle(pattern, s.serve(h))
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
	first := SHA(owner + "/" + name + "@" + defaultBranch)
	r := &repo{
		owner: owner, name: name, defaultBranch: defaultBranch,
		branches:  map[string]string{defaultBranch: first},
		statuses:  map[string][]Status{},
		checkRuns: map[string][]CheckRun{},
		commits:   map[string]*commit{},
	}
	s.record(r, first, nil, map[string]string{"README.md": "# " + name + "\n"}, "Initial commit", "Owner", "owner@example.com")
	s.repos[owner+"/"+name] = r
}

// repo panics on a test's mistake (an unknown repository given to a test
// method); callers hold mu.
func (s *Server) repo(owner, name string) *repo {
	r, ok := s.repos[owner+"/"+name]
	if !ok {
		panic(fmt.Sprintf("githubfake: no repository %s/%s: call AddRepo first", owner, name))
	}
	return r
}
