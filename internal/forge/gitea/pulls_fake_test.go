package gitea

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
)

const (
	findRoute   = "GET /repos/acme/app/pulls/main/feature"
	createRoute = "POST /repos/acme/app/pulls"
	listRoute   = "GET /repos/acme/app/pulls"
	branchRoute = "GET /repos/acme/app/branches/feature"
)

func ensure(g *fakeGitea, repo forge.Repo, branch, title string) (forge.PullRequest, error) {
	return g.forge(clock.NewFake(fakeNow)).EnsurePullRequest(context.Background(), repo, branch, title, "the body")
}

// TestEnsureOpensWhenThereIsNone: no pull request of the branch: one is
// opened of the branch into the default branch, titled as asked (the
// branch's name when the title is blank), and returned with its head.
func TestEnsureOpensWhenThereIsNone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ title, want string }{{"Fix the thing", "Fix the thing"}, {"  ", "feature"}} {
		g := newFake(t)
		g.on(branchRoute, 200, branchJSON("feature", headSHA))
		g.on(createRoute, 201, pullJSON(9, sdk.StateOpen, true, false))
		pr, err := ensure(g, g.repo(), "feature", c.title)
		want := forge.PullRequest{Number: 9, URL: "http://gitea.example/acme/app/pulls/9", Branch: "feature", Base: "main", HeadSHA: headSHA}
		if err != nil || pr != want {
			t.Fatalf("Ensure: %+v %v, want %+v", pr, err, want)
		}
		rs := g.requests(createRoute)
		if len(rs) != 1 {
			t.Fatalf("%d creates, want 1", len(rs))
		}
		var body sdk.CreatePullRequestOption
		if err := json.Unmarshal([]byte(rs[0].body), &body); err != nil || body.Head != "feature" || body.Base != "main" || body.Title != c.want || body.Body != "the body" {
			t.Errorf("create %s (%v), want feature into main titled %q", rs[0].body, err, c.want)
		}
		if a := rs[0].header.Get("Authorization"); a != "token "+fakeToken {
			t.Errorf("create Authorization %q, want the repository's token", a)
		}
		if n := len(g.requests(listRoute)) - len(g.requests(listRoute+"/")); n != 0 {
			t.Errorf("the list was read %d times with no pull request of the pair", n)
		}
	}
}

// TestEnsureAdoptsTheOpenOne: the open pull request of the pair (in the
// same repository) is returned as it is: nothing opened, no list read.
func TestEnsureAdoptsTheOpenOne(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on(branchRoute, 200, branchJSON("feature", headSHA))
	g.on(findRoute, 200, pullJSON(5, sdk.StateOpen, true, false))
	pr, err := ensure(g, g.anon(), "feature", "t")
	if err != nil || pr.Number != 5 || pr.HeadSHA != headSHA || pr.Branch != "feature" || pr.Base != "main" {
		t.Fatalf("Ensure: %+v %v, want #5 at %s", pr, err, headSHA)
	}
	for _, r := range g.requests("") {
		if r.method != http.MethodGet || r.path == "/repos/acme/app/pulls" {
			t.Errorf("adopting the open one: %s %s?%s", r.method, r.path, r.query)
		}
		if a := r.header.Get("Authorization"); a != "" {
			t.Errorf("an anonymous read sent Authorization %q", a)
		}
	}
}

// TestEnsureRefusesBeforeAsking: a branch that is no branch name or is the
// default branch, a bad default branch, a bad location: refused, nothing
// asked.
func TestEnsureRefusesBeforeAsking(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	badBase := g.repo()
	badBase.DefaultBranch = "bad..name"
	badURL := g.repo()
	badURL.URL = "ssh://example.com/acme/app.git"
	for _, c := range []struct {
		name   string
		repo   forge.Repo
		branch string
		is     error
		want   string
	}{
		{"the default branch", g.repo(), "main", forge.ErrInvalidBranch, `"main" is the default branch`},
		{"no branch name", g.repo(), "a..b", forge.ErrInvalidBranch, ""},
		{"a bad default branch", badBase, "feature", nil, "the default branch"},
		{"a bad location", badURL, "feature", nil, "repository.url"},
	} {
		_, err := ensure(g, c.repo, c.branch, "t")
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || (c.is == nil && errors.Is(err, forge.ErrInvalidBranch)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v with %q", c.name, err, c.is, c.want)
		}
	}
	if rs := g.requests(""); len(rs) != 0 {
		t.Errorf("refused Ensures sent %d requests", len(rs))
	}
}

// TestEnsureNeedsThePushedBranch: a branch Gitea does not have is
// forge.ErrBranchNotPushed; a branch read failing, or answered without a
// head commit, is an error; none opens anything.
func TestEnsureNeedsThePushedBranch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		status int
		body   any
		is     error
		want   string
	}{
		{"missing", 404, map[string]string{"message": "branch does not exist"}, forge.ErrBranchNotPushed, "feature is not in acme/app"},
		{"server error", 500, map[string]string{"message": "boom"}, nil, "boom"},
		{"null", 200, "null", nil, "no head commit"},
		{"no commit", 200, map[string]any{"name": "feature"}, nil, "no head commit"},
		{"no commit id", 200, map[string]any{"name": "feature", "commit": map[string]any{}}, nil, "no head commit"},
	} {
		g := newFake(t)
		g.on(branchRoute, c.status, c.body)
		_, err := ensure(g, g.repo(), "feature", "t")
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || (c.is == nil && errors.Is(err, forge.ErrBranchNotPushed)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v with %q", c.name, err, c.is, c.want)
		}
		if n := len(g.requests(createRoute)); n != 0 {
			t.Errorf("%s: opened %d", c.name, n)
		}
	}
}

// TestEnsureOpensNothingWhenTheLookUpFails: a look-up answering an error
// (or a rate limit, on the pair or on the list) fails Ensure: nothing
// is opened on a guess.
func TestEnsureOpensNothingWhenTheLookUpFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		pair      answer
		list      answer
		rateLimit bool
	}{
		{name: "the pair 500", pair: answer{status: 500, body: map[string]string{"message": "boom"}}},
		{name: "the list 500", pair: answer{status: 200, body: pullJSON(3, sdk.StateClosed, false, false)}, list: answer{status: 500, body: map[string]string{"message": "boom"}}},
		{name: "the list 429", pair: answer{status: 200, body: pullJSON(3, sdk.StateClosed, false, false)},
			list: answer{status: 429, header: http.Header{"Retry-After": {"30"}}, body: map[string]string{"message": "slow down"}}, rateLimit: true},
	} {
		g := newFake(t)
		g.on(branchRoute, 200, branchJSON("feature", headSHA))
		g.seq(findRoute, c.pair)
		if c.list.status != 0 {
			g.seq(listRoute, c.list)
		}
		_, err := ensure(g, g.repo(), "feature", "t")
		var rl *forge.RateLimitedError
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case c.rateLimit && (!errors.As(err, &rl) || !rl.Until.Equal(fakeNow.Add(30*time.Second))):
			t.Errorf("%s: %v, want rate limited for 30 s", c.name, err)
		case !c.rateLimit && !strings.Contains(err.Error(), "boom"):
			t.Errorf("%s: %v, want Gitea's message", c.name, err)
		}
		if n := len(g.requests(createRoute)); n != 0 {
			t.Errorf("%s: opened %d", c.name, n)
		}
	}
}

// TestAnonymousEnsureOpensNothing: without credentials a pull request is
// found but never opened.
func TestAnonymousEnsureOpensNothing(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on(branchRoute, 200, branchJSON("feature", headSHA))
	g.on(createRoute, 201, pullJSON(9, sdk.StateOpen, true, false))
	if _, err := ensure(g, g.anon(), "feature", "t"); err == nil || !strings.Contains(err.Error(), "no credentials_ref") {
		t.Fatalf("anonymous Ensure: %v", err)
	}
	if n := len(g.requests(createRoute)); n != 0 {
		t.Fatalf("opened %d", n)
	}
}

// TestEnsureCreateAnswers: Gitea's refusals of the create: 409 (opened
// meanwhile) adopts the one opened, or fails when none is found; 404 (the
// head vanished) is forge.ErrBranchNotPushed; 422 an error; 429 a rate
// limit.
func TestEnsureCreateAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		create   answer
		after    answer // the pair's answer after the create
		adopt    int
		is       error
		want     string
		limited  bool
		notFound bool
	}{
		{name: "409 adopts", create: answer{status: 409, body: map[string]string{"message": "pull request already exists"}},
			after: answer{status: 200, body: pullJSON(6, sdk.StateOpen, true, false)}, adopt: 6},
		{name: "409 none found", create: answer{status: 409, body: map[string]string{"message": "pull request already exists"}},
			after: answer{status: 404, body: map[string]string{"message": "Not Found"}}, want: "HTTP 409: pull request already exists"},
		{name: "409 the look-up failing", create: answer{status: 409, body: map[string]string{"message": "pull request already exists"}},
			after: answer{status: 500, body: map[string]string{"message": "look-up broke"}}, want: "look-up broke"},
		{name: "404", create: answer{status: 404, body: map[string]string{"message": "head does not exist"}},
			after: answer{status: 404}, is: forge.ErrBranchNotPushed, want: "head does not exist"},
		{name: "422", create: answer{status: 422, body: map[string]string{"message": "invalid title"}},
			after: answer{status: 404}, want: "HTTP 422: invalid title"},
		{name: "429", create: answer{status: 429, header: http.Header{"Retry-After": {"30"}}, body: map[string]string{"message": "slow"}},
			after: answer{status: 404}, limited: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newFake(t)
			g.on(branchRoute, 200, branchJSON("feature", headSHA))
			g.seq(findRoute, answer{status: 404, body: map[string]string{"message": "Not Found"}}, c.after)
			g.seq(createRoute, c.create)
			pr, err := ensure(g, g.repo(), "feature", "t")
			var rl *forge.RateLimitedError
			switch {
			case c.adopt != 0:
				if err != nil || pr.Number != c.adopt || pr.HeadSHA != headSHA {
					t.Fatalf("Ensure: %+v %v, want #%d adopted", pr, err, c.adopt)
				}
			case c.limited:
				if !errors.As(err, &rl) {
					t.Fatalf("Ensure: %v, want rate limited", err)
				}
			case err == nil || pr != (forge.PullRequest{}):
				t.Fatalf("Ensure: %+v %v, want an error", pr, err)
			case c.is != nil && !errors.Is(err, c.is), c.is == nil && errors.Is(err, forge.ErrBranchNotPushed):
				t.Fatalf("Ensure: %v, want %v", err, c.is)
			case !strings.Contains(err.Error(), c.want):
				t.Fatalf("Ensure: %v, want %q", err, c.want)
			}
		})
	}
}

// listOf answers the pull request list by page (50 a page), as Gitea does,
// and fails a reader that pages on past the end.
func listOf(t *testing.T, prs []*sdk.PullRequest) func(*http.Request, string) answer {
	return func(r *http.Request, _ string) answer {
		q := r.URL.Query()
		page, _ := strconv.Atoi(q.Get("page"))
		if q.Get("state") != "all" || q.Get("limit") != "50" {
			t.Errorf("list %s: want state=all, limit=50", r.URL.RawQuery)
		}
		if page < 1 || (page-1)*50 > len(prs) {
			return answer{status: 500, body: map[string]string{"message": fmt.Sprintf("page %d read: the list has %d", page, len(prs))}}
		}
		return answer{status: 200, body: prs[(page-1)*50 : min(page*50, len(prs))]}
	}
}

// TestEnsureReadsTheListWhenTheOneFoundIsNotOpen: Gitea answers one pull
// request for the pair; a closed one says nothing of the others, so the
// whole list (every page) is read, and of the pull requests of this branch
// into this base in this repository the newest open one is adopted —
// never one of another branch, another base, or a fork.
func TestEnsureReadsTheListWhenTheOneFoundIsNotOpen(t *testing.T) {
	t.Parallel()
	at := func(h int) *time.Time { v := fakeNow.Add(time.Duration(h) * time.Hour); return &v }
	pr := func(n int64, head, base string, repo int64, state sdk.StateType, created *time.Time) *sdk.PullRequest {
		p := pullJSON(n, state, true, false)
		p.Head.Ref, p.Base.Ref, p.Head.RepoID, p.Created = head, base, repo, created
		return p
	}
	var all []*sdk.PullRequest
	for n := range 47 {
		all = append(all, pr(int64(100+n), "other", "main", 1, sdk.StateOpen, at(-n)))
	}
	noHead := pr(200, "feature", "main", 1, sdk.StateOpen, at(1))
	noHead.Head = nil
	noBase := pr(201, "feature", "main", 1, sdk.StateOpen, at(1))
	noBase.Base = nil
	all = append(all, noHead, noBase,
		pr(202, "feature", "main", 2, sdk.StateOpen, at(2)),    // a fork's branch of the same name
		pr(203, "feature", "release", 1, sdk.StateOpen, at(2)), // into another base
		pr(3, "feature", "main", 1, sdk.StateClosed, at(-48)),  // the closed one answered for the pair
		pr(21, "feature", "main", 1, sdk.StateOpen, at(-2)),    // open, older
		pr(20, "feature", "main", 1, sdk.StateOpen, at(-1)),    // open, newest: adopted
		pr(204, "other", "release", 1, sdk.StateOpen, at(3)))
	g := newFake(t)
	g.on(branchRoute, 200, branchJSON("feature", headSHA))
	g.on(findRoute, 200, pr(3, "feature", "main", 1, sdk.StateClosed, at(-48)))
	g.handle(listRoute, listOf(t, all))
	got, err := ensure(g, g.repo(), "feature", "t")
	if err != nil || got.Number != 20 || got.HeadSHA != headSHA {
		t.Fatalf("Ensure: %+v %v, want #20, the newest open one", got, err)
	}
	if n := len(g.requests(listRoute)) - len(g.requests(listRoute+"/")); n != 2 {
		t.Errorf("%d list pages read, want 2", n)
	}
	if n := len(g.requests(createRoute)); n != 0 {
		t.Errorf("opened %d", n)
	}
}

// TestEnsureAdoptsTheClosedOneOfTheCurrentHead: with no open pull request,
// a closed or merged one whose head is the branch's head is adopted (its
// work is already merged or turned down); an older one's is history, and a
// new one is opened. A short list is read once.
func TestEnsureAdoptsTheClosedOneOfTheCurrentHead(t *testing.T) {
	t.Parallel()
	const older = "5555555555555555555555555555555555555555"
	for _, c := range []struct {
		name  string
		head  string
		adopt int
	}{{"at the head", headSHA, 3}, {"at an older head", older, 9}} {
		g := newFake(t)
		g.on(branchRoute, 200, branchJSON("feature", headSHA))
		merged := pullJSON(3, sdk.StateClosed, false, true)
		merged.Head.Sha = c.head
		g.on(findRoute, 200, merged)
		g.handle(listRoute, listOf(t, []*sdk.PullRequest{merged}))
		g.on(createRoute, 201, pullJSON(9, sdk.StateOpen, true, false))
		got, err := ensure(g, g.repo(), "feature", "t")
		if err != nil || got.Number != c.adopt {
			t.Errorf("%s: %+v %v, want #%d", c.name, got, err, c.adopt)
		}
		if n := len(g.requests(listRoute)) - len(g.requests(listRoute+"/")); n != 1 {
			t.Errorf("%s: %d list pages read, want 1", c.name, n)
		}
	}
}

// TestAForksPullRequestIsNotAdopted: an open pull request of a branch of
// the same name in a fork is someone else's: Ballet opens its own.
func TestAForksPullRequestIsNotAdopted(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on(branchRoute, 200, branchJSON("feature", headSHA))
	fork := pullJSON(4, sdk.StateOpen, true, false)
	fork.Head.RepoID = 2
	g.on(findRoute, 200, fork)
	g.handle(listRoute, listOf(t, []*sdk.PullRequest{fork}))
	g.on(createRoute, 201, pullJSON(9, sdk.StateOpen, true, false))
	if got, err := ensure(g, g.repo(), "feature", "t"); err != nil || got.Number != 9 {
		t.Fatalf("Ensure with a fork's pull request open: %+v %v, want #9 opened", got, err)
	}
}

func TestSameRepo(t *testing.T) {
	for _, c := range []struct {
		name string
		p    sdk.PullRequest
		want bool
	}{
		{"same", sdk.PullRequest{Head: &sdk.PRBranchInfo{RepoID: 5}, Base: &sdk.PRBranchInfo{RepoID: 5}}, true},
		{"fork", sdk.PullRequest{Head: &sdk.PRBranchInfo{RepoID: 6}, Base: &sdk.PRBranchInfo{RepoID: 5}}, false},
		{"head repository unknown", sdk.PullRequest{Head: &sdk.PRBranchInfo{RepoID: 0}, Base: &sdk.PRBranchInfo{RepoID: 5}}, true},
		{"no head", sdk.PullRequest{Base: &sdk.PRBranchInfo{RepoID: 5}}, true},
		{"no base", sdk.PullRequest{Head: &sdk.PRBranchInfo{RepoID: 5}}, true},
	} {
		if got := sameRepo(&c.p); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCloseClosesTheOpenOne: Close sets an open pull request's state to
// closed, with the repository's token.
func TestCloseClosesTheOpenOne(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on("GET /repos/acme/app/pulls/7", 200, pullJSON(7, sdk.StateOpen, true, false))
	g.on("PATCH /repos/acme/app/pulls/7", 201, pullJSON(7, sdk.StateClosed, true, false))
	if err := g.forge(clock.NewFake(fakeNow)).Close(context.Background(), g.repo(), fakePR); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rs := g.requests("PATCH /repos/acme/app/pulls/7")
	if len(rs) != 1 {
		t.Fatalf("%d edits, want 1", len(rs))
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(rs[0].body), &body); err != nil || body["state"] != "closed" {
		t.Errorf("edit %s (%v), want state closed", rs[0].body, err)
	}
	if a := rs[0].header.Get("Authorization"); a != "token "+fakeToken {
		t.Errorf("edit Authorization %q", a)
	}
}

// TestCloseLeavesTheRestAlone: a pull request never opened, gone, closed
// or merged is left as it is; a read failing, a repository without
// credentials and Gitea refusing the edit are errors in Gitea's words.
func TestCloseLeavesTheRestAlone(t *testing.T) {
	t.Parallel()
	badURL := forge.Repo{URL: "ssh://example.com/acme/app.git"}
	for _, c := range []struct {
		name   string
		number int
		anon   bool
		repo   *forge.Repo
		read   answer
		edit   answer
		want   string // "": no error
		asks   int    // requests sent
	}{
		{name: "never opened", number: 0, read: answer{status: 200, body: pullJSON(0, sdk.StateOpen, true, false)}},
		{name: "gone", number: 7, read: answer{status: 404, body: map[string]string{"message": "Not Found"}}, asks: 1},
		{name: "closed", number: 7, read: answer{status: 200, body: pullJSON(7, sdk.StateClosed, true, false)}, asks: 1},
		{name: "merged", number: 7, read: answer{status: 200, body: pullJSON(7, sdk.StateClosed, false, true)}, asks: 1},
		{name: "read fails", number: 7, read: answer{status: 500, body: map[string]string{"message": "boom"}}, want: "HTTP 500: boom", asks: 1},
		{name: "anonymous", number: 7, anon: true, read: answer{status: 200, body: pullJSON(7, sdk.StateOpen, true, false)}, want: "no credentials_ref", asks: 1},
		{name: "refused", number: 7, read: answer{status: 200, body: pullJSON(7, sdk.StateOpen, true, false)},
			edit: answer{status: 403, body: map[string]string{"message": "user should have permission to edit"}}, want: "HTTP 403: user should have permission to edit", asks: 2},
		{name: "bad location", number: 7, repo: &badURL, want: "repository.url"},
	} {
		g := newFake(t)
		g.seq(fmt.Sprintf("GET /repos/acme/app/pulls/%d", c.number), c.read)
		if c.edit.status != 0 {
			g.seq(fmt.Sprintf("PATCH /repos/acme/app/pulls/%d", c.number), c.edit)
		}
		repo := g.repo()
		if c.anon {
			repo = g.anon()
		}
		if c.repo != nil {
			repo = *c.repo
		}
		pr := fakePR
		pr.Number = c.number
		err := g.forge(clock.NewFake(fakeNow)).Close(context.Background(), repo, pr)
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want))) {
			t.Errorf("%s: Close: %v, want %q", c.name, err, c.want)
		}
		if n := len(g.requests("")); n != c.asks {
			t.Errorf("%s: %d requests, want %d", c.name, n, c.asks)
		}
	}
}
