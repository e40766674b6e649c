package gitea

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
)

var fakePR = forge.PullRequest{Number: 7, Branch: "feature", Base: "main", HeadSHA: headSHA}

// TestAMergeHasItsOwnTimeout: Gitea answers a merge once it has merged and
// run its hooks, which outlasts an ordinary call's timeout on a busy
// server; the merge waits MergeTimeout (3 min by default) instead, and
// gives up after it.
func TestAMergeHasItsOwnTimeout(t *testing.T) {
	t.Parallel()
	if f := New(Options{}); f.mergeHC.Timeout != 3*time.Minute || f.hc.Timeout != 30*time.Second {
		t.Errorf("defaults: merge timeout %s, call timeout %s; want 3m and 30s", f.mergeHC.Timeout, f.hc.Timeout)
	}
	g := newFake(t)
	g.handle("POST /repos/acme/app/pulls/7/merge", func(*http.Request, string) answer {
		time.Sleep(300 * time.Millisecond)
		return answer{status: 200, body: ""}
	})
	f := func(merge time.Duration) *Forge {
		return New(Options{Secrets: g.forge(nil).secrets, HTTPClient: &http.Client{Timeout: 50 * time.Millisecond},
			Clock: clock.NewFake(fakeNow), MergeableTries: 1, MergeTimeout: merge})
	}
	if err := f(30*time.Second).Merge(context.Background(), g.repo(), fakePR); err != nil {
		t.Errorf("a merge answered after 300 ms with a 50 ms call timeout and a 30 s merge timeout: %v", err)
	}
	if err := f(50*time.Millisecond).Merge(context.Background(), g.repo(), fakePR); err == nil || !strings.Contains(err.Error(), "merge pull request #7") {
		t.Errorf("a merge answered after 300 ms with a 50 ms merge timeout: %v, want a timeout naming the call", err)
	}
}

// TestMergeSendsTheDecidedHead: a merge asks Gitea for a merge commit of
// exactly the head Ballet decided on, as JSON, with the repository's token.
func TestMergeSendsTheDecidedHead(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on("POST /repos/acme/app/pulls/7/merge", 200, "")
	if err := g.forge(clock.NewFake(fakeNow)).Merge(context.Background(), g.repo(), fakePR); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	rs := g.requests("POST /repos/acme/app/pulls/7/merge")
	if len(rs) != 1 {
		t.Fatalf("%d merge requests, want 1", len(rs))
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(rs[0].body), &body); err != nil || body["Do"] != "merge" || body["head_commit_id"] != headSHA || len(body) != 2 {
		t.Errorf("merge body %s (%v), want Do merge at head_commit_id %s", rs[0].body, err, headSHA)
	}
	if ct := rs[0].header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("merge Content-Type %q, want application/json", ct)
	}
	if a := rs[0].header.Get("Authorization"); a != "token "+fakeToken {
		t.Errorf("merge Authorization %q, want the repository's token", a)
	}
	if n := len(g.requests("GET ")); n != 0 {
		t.Errorf("a merge Gitea accepted read %d more things, want none", n)
	}
}

// TestMergeNeedsANumberAHeadAndAToken: a merge without the pull request's
// number, without its decided head, or of a repository without
// credentials is refused before Gitea is asked anything.
func TestMergeNeedsANumberAHeadAndAToken(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on("POST /repos/acme/app/pulls/7/merge", 200, "")
	g.on("POST /repos/acme/app/pulls/0/merge", 200, "")
	f := g.forge(clock.NewFake(fakeNow))
	for name, c := range map[string]struct {
		repo forge.Repo
		pr   forge.PullRequest
		want string
	}{
		"number 0":       {g.repo(), forge.PullRequest{Number: 0, Branch: "feature", HeadSHA: headSHA}, "number and decided head"},
		"number -1":      {g.repo(), forge.PullRequest{Number: -1, Branch: "feature", HeadSHA: headSHA}, "number and decided head"},
		"no head":        {g.repo(), forge.PullRequest{Number: 7, Branch: "feature"}, "number and decided head"},
		"no credentials": {g.anon(), fakePR, "no credentials_ref"},
		"bad location":   {forge.Repo{URL: "ssh://example.com/acme/app.git", CredentialsRef: "env:GITEA_TOKEN"}, fakePR, "repository.url"},
	} {
		if err := f.Merge(context.Background(), c.repo, c.pr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Merge: %v, want an error with %q", name, err, c.want)
		}
	}
	if rs := g.requests(""); len(rs) != 0 {
		t.Errorf("refused merges sent %d requests, want none", len(rs))
	}
}

// TestMergeRefusalsAreJudgedByThePullRequest: when Gitea refuses a merge
// (405, 409, 404), the pull request read again tells why: merged at the
// decided head is done, merged at another head or moved is out of date,
// closed or still open at the head is not mergeable — quoting Gitea's
// message. Another refusal (500, 403) is an error, never judged.
func TestMergeRefusalsAreJudgedByThePullRequest(t *testing.T) {
	t.Parallel()
	const moved = "3333333333333333333333333333333333333333"
	open := pullJSON(7, sdk.StateOpen, true, false)
	movedOpen := pullJSON(7, sdk.StateOpen, true, false)
	movedOpen.Head.Sha = moved
	merged := pullJSON(7, sdk.StateClosed, false, true)
	closed := pullJSON(7, sdk.StateClosed, false, false)
	refs := func(sha string) answer {
		return answer{status: 200, body: []map[string]any{{"ref": "refs/pull/7/head", "object": map[string]any{"sha": sha, "type": "commit"}}}}
	}
	for _, c := range []struct {
		name   string
		status int
		pull   *sdk.PullRequest
		ref    answer // refs/pull/7/head for a pull request no longer open
		want   error  // nil: success
		reread bool
	}{
		{"405 merged at the head", 405, merged, refs(headSHA), nil, true},
		{"409 merged at the head", 409, merged, refs(headSHA), nil, true},
		{"404 merged at the head", 404, merged, refs(headSHA), nil, true},
		{"405 merged at another head", 405, merged, refs(moved), forge.ErrOutOfDate, true},
		{"404 closed", 404, closed, refs(headSHA), forge.ErrNotMergeable, true},
		{"409 moved on", 409, movedOpen, answer{}, forge.ErrOutOfDate, true},
		{"405 open at the head", 405, open, answer{}, forge.ErrNotMergeable, true},
		{"500", 500, merged, refs(headSHA), nil, false},
		{"403", 403, merged, refs(headSHA), nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newFake(t)
			g.on("POST /repos/acme/app/pulls/7/merge", c.status, map[string]string{"message": "Gitea says no"})
			g.on("GET /repos/acme/app/pulls/7", 200, c.pull)
			if c.ref.status != 0 {
				g.seq("GET /repos/acme/app/git/refs/pull/7/head", c.ref)
			}
			err := g.forge(clock.NewFake(fakeNow)).Merge(context.Background(), g.repo(), fakePR)
			switch {
			case !c.reread:
				if err == nil || errors.Is(err, forge.ErrNotMergeable) || errors.Is(err, forge.ErrOutOfDate) ||
					!strings.Contains(err.Error(), "Gitea says no") || !strings.Contains(err.Error(), "acme/app") {
					t.Fatalf("Merge: %v, want a plain error quoting Gitea", err)
				}
				if n := len(g.requests("GET ")); n != 0 {
					t.Fatalf("a %d was judged by reading %d things, want none", c.status, n)
				}
				return
			case c.want == nil:
				if err != nil {
					t.Fatalf("Merge: %v, want done", err)
				}
			case !errors.Is(err, c.want):
				t.Fatalf("Merge: %v, want %v", err, c.want)
			}
			if n := len(g.requests("GET /repos/acme/app/pulls/7")); n != 1 {
				t.Fatalf("the pull request was read %d times after the refusal, want 1", n)
			}
			if c.want == forge.ErrNotMergeable && c.pull.State == sdk.StateOpen && !strings.Contains(err.Error(), "Gitea says no") {
				t.Errorf("Merge: %v, want Gitea's message quoted", err)
			}
		})
	}
}

// TestMergeRefusalWhoseReReadFails: when the pull request cannot be read
// after a refusal, or (closed) its head cannot, the merge fails with both
// errors and is not judged.
func TestMergeRefusalWhoseReReadFails(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on("POST /repos/acme/app/pulls/7/merge", 405, map[string]string{"message": "try again later"})
	g.on("GET /repos/acme/app/pulls/7", 500, map[string]string{"message": "database is locked"})
	f := g.forge(clock.NewFake(fakeNow))
	err := f.Merge(context.Background(), g.repo(), fakePR)
	if err == nil || errors.Is(err, forge.ErrNotMergeable) || !strings.Contains(err.Error(), "try again later") || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("Merge, the re-read failing: %v, want both errors", err)
	}
	g.on("GET /repos/acme/app/pulls/7", 200, pullJSON(7, sdk.StateClosed, false, true))
	g.on("GET /repos/acme/app/git/refs/pull/7/head", 500, map[string]string{"message": "refs are gone"})
	err = f.Merge(context.Background(), g.repo(), fakePR)
	if err == nil || errors.Is(err, forge.ErrNotMergeable) || !strings.Contains(err.Error(), "try again later") || !strings.Contains(err.Error(), "refs are gone") {
		t.Fatalf("Merge, the head's read failing: %v, want both errors", err)
	}
}

// TestMergeQuotesGitea: Gitea's message, a body that is not a message
// (JSON or text, on one line) or the status's text: whatever Gitea said
// is in the refusal, in its words.
func TestMergeQuotesGitea(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body, want, not string
	}{
		{"message", `{"message":"Please try again later"}`, "HTTP 405: Please try again later", `{`},
		{"JSON without a message", `{"errors":["head is behind"]}`, `HTTP 405: {"errors":["head is behind"]}`, "Method Not Allowed"},
		{"text", "upstream\n   exploded   twice\n", "HTTP 405: upstream exploded twice", "Method Not Allowed"},
		{"nothing", "", "HTTP 405: Method Not Allowed", "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newFake(t)
			g.on("POST /repos/acme/app/pulls/7/merge", 405, c.body)
			g.on("GET /repos/acme/app/pulls/7", 200, pullJSON(7, sdk.StateOpen, true, false))
			err := g.forge(clock.NewFake(fakeNow)).Merge(context.Background(), g.repo(), fakePR)
			if !errors.Is(err, forge.ErrNotMergeable) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
				t.Fatalf("Merge: %v, want ErrNotMergeable with %q (and no %q)", err, c.want, c.not)
			}
		})
	}
}

// TestMergeRateLimited: a rate limit on the merge itself is
// *forge.RateLimitedError, not a refusal to judge.
func TestMergeRateLimited(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.handle("POST /repos/acme/app/pulls/7/merge", func(*http.Request, string) answer {
		return answer{status: 429, header: http.Header{"Retry-After": {"60"}}, body: map[string]string{"message": "slow down"}}
	})
	err := g.forge(clock.NewFake(fakeNow)).Merge(context.Background(), g.repo(), fakePR)
	var rl *forge.RateLimitedError
	if !errors.As(err, &rl) || !rl.Until.Equal(fakeNow.Add(60e9)) {
		t.Fatalf("Merge on 429: %v, want rate limited for a minute", err)
	}
	if n := len(g.requests("GET ")); n != 0 {
		t.Fatalf("a rate-limited merge read %d things, want none", n)
	}
}

// TestAHeadInTheBaseIsMarkedMerged: an open pull request whose head is in
// the base already is merged; Ballet records it so on Gitea ("manually
// merged" at the base's head commit), and only with a token.
func TestAHeadInTheBaseIsMarkedMerged(t *testing.T) {
	t.Parallel()
	for _, anon := range []bool{false, true} {
		g := newFake(t)
		g.scriptOpenPull(true)
		g.on("GET /repos/acme/app/compare/main..."+headSHA, 200, map[string]any{"total_commits": 0})
		g.on("POST /repos/acme/app/pulls/7/merge", 200, "")
		repo := g.repo()
		if anon {
			repo = g.anon()
		}
		st, err := g.forge(clock.NewFake(fakeNow)).State(context.Background(), repo, fakePR)
		if err != nil || !st.Merged || st.Open || st.Closed {
			t.Fatalf("State of a head in the base: %+v %v, want merged", st, err)
		}
		rs := g.requests("POST /repos/acme/app/pulls/7/merge")
		if anon {
			if len(rs) != 0 {
				t.Fatalf("an anonymous State sent %d merges", len(rs))
			}
			continue
		}
		if len(rs) != 1 {
			t.Fatalf("%d merges sent, want 1", len(rs))
		}
		var body map[string]string
		if err := json.Unmarshal([]byte(rs[0].body), &body); err != nil || body["Do"] != "manually-merged" || body["merge_commit_id"] != baseSHA || len(body) != 2 {
			t.Fatalf("mark merged %s (%v), want Do manually-merged at merge_commit_id %s", rs[0].body, err, baseSHA)
		}
	}
}
