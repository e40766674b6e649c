package gitea

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
)

// fakeGitea is Gitea's API as this forge reads and writes it, scripted per
// test, on 127.0.0.1: each route ("GET /repos/acme/app/pulls/7", the path
// after /api/v1) answers what its handler returns; a route not scripted
// answers 404 {"message":"Not Found"} as Gitea does. Every request is
// recorded. The tests on a real Gitea (TestContract, TestPolicy) hold the
// forge to Gitea itself; these pin each rule down in milliseconds.
type fakeGitea struct {
	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]func(r *http.Request, body string) answer
	reqs   []fakeReq
}

// answer is one reply of the fake: a status, a JSON body (a string is
// sent as it is) and headers.
type answer struct {
	status int
	body   any
	header http.Header
}

type fakeReq struct {
	method, path, query, body string
	header                    http.Header
}

const (
	fakeToken = "fake-t0ken-3x4mple"
	headSHA   = "1111111111111111111111111111111111111111"
	baseSHA   = "2222222222222222222222222222222222222222"
)

func newFake(t testing.TB) *fakeGitea {
	g := &fakeGitea{t: t, routes: map[string]func(*http.Request, string) answer{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGitea) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	g.mu.Lock()
	g.reqs = append(g.reqs, fakeReq{method: r.Method, path: path, query: r.URL.RawQuery, body: string(b), header: r.Header.Clone()})
	h, ok := g.routes[r.Method+" "+path]
	g.mu.Unlock()
	a := answer{status: http.StatusNotFound, body: map[string]string{"message": "Not Found"}}
	if ok {
		a = h(r, string(b))
	}
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	switch v := a.body.(type) {
	case nil:
	case string:
		io.WriteString(w, v)
	default:
		json.NewEncoder(w).Encode(v)
	}
}

// on scripts route to answer a, whatever the request.
func (g *fakeGitea) on(route string, status int, body any) {
	g.handle(route, func(*http.Request, string) answer { return answer{status: status, body: body} })
}

// handle scripts route with a handler.
func (g *fakeGitea) handle(route string, h func(r *http.Request, body string) answer) {
	g.mu.Lock()
	g.routes[route] = h
	g.mu.Unlock()
}

// seq scripts route to give the answers in turn, the last one from then on.
func (g *fakeGitea) seq(route string, as ...answer) {
	var mu sync.Mutex
	g.handle(route, func(*http.Request, string) answer {
		mu.Lock()
		defer mu.Unlock()
		a := as[0]
		if len(as) > 1 {
			as = as[1:]
		}
		return a
	})
}

// requests lists the requests received so far whose "METHOD path" starts
// with prefix.
func (g *fakeGitea) requests(prefix string) []fakeReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []fakeReq
	for _, r := range g.reqs {
		if strings.HasPrefix(r.method+" "+r.path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// repo is the fake's repository acme/app, with the token.
func (g *fakeGitea) repo() forge.Repo {
	return forge.Repo{URL: g.srv.URL + "/acme/app.git", DefaultBranch: "main", CredentialsRef: "env:GITEA_TOKEN"}
}

// anon is the same repository without credentials.
func (g *fakeGitea) anon() forge.Repo {
	r := g.repo()
	r.CredentialsRef = ""
	return r
}

// forge is a Forge on the fake's clock, reading a pull request once.
func (g *fakeGitea) forge(clk clock.Clock) *Forge {
	return New(Options{Secrets: envs(func(k string) (string, bool) { return fakeToken, k == "GITEA_TOKEN" }), Clock: clk, MergeableTries: 1})
}

var fakeNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// pullJSON is Gitea's answer for pull request n of branch "feature" into
// main, at headSHA and baseSHA, in the same repository.
func pullJSON(n int64, state sdk.StateType, mergeable, merged bool) *sdk.PullRequest {
	return &sdk.PullRequest{
		Index: n, HTMLURL: "http://gitea.example/acme/app/pulls/" + strconv.FormatInt(n, 10), State: state, Mergeable: mergeable, HasMerged: merged,
		Head: &sdk.PRBranchInfo{Ref: "feature", Sha: headSHA, RepoID: 1},
		Base: &sdk.PRBranchInfo{Ref: "main", Sha: baseSHA, RepoID: 1},
	}
}

// branchJSON is Gitea's answer for a branch at sha.
func branchJSON(name, sha string) map[string]any {
	return map[string]any{"name": name, "commit": map[string]any{"id": sha}}
}

// scriptOpenPull scripts pull request 7 open at headSHA, its branch
// pushed, its head not in main, no statuses, no reviews.
func (g *fakeGitea) scriptOpenPull(mergeable bool) {
	g.on("GET /repos/acme/app/pulls/7", 200, pullJSON(7, sdk.StateOpen, mergeable, false))
	g.on("GET /repos/acme/app/branches/feature", 200, branchJSON("feature", headSHA))
	g.on("GET /repos/acme/app/branches/main", 200, branchJSON("main", baseSHA))
	g.on("GET /repos/acme/app/compare/main..."+headSHA, 200, map[string]any{"total_commits": 1})
	g.on("GET /repos/acme/app/commits/"+headSHA+"/status", 200, map[string]any{"statuses": []any{}})
	g.on("GET /repos/acme/app/pulls/7/reviews", 200, []any{})
}
