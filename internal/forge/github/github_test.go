package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v84/github"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/githubfake"
	"github.com/ballet/ballet/internal/secret"
)

const token = "ghp_s3cretTOKENvalue"

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	fake *githubfake.Server
	f    *Forge
	repo forge.Repo
	clk  *clock.Fake
	ctx  context.Context
}

// setup starts a fake GitHub with acme/app (default branch main) and a
// client for it. before, when set, runs before every request the client
// sends (a concurrent actor, or a spy).
func setup(t *testing.T, before func(*http.Request)) env {
	t.Helper()
	clk := clock.NewFake(start)
	fake := githubfake.New(githubfake.Options{Token: token, Clock: clk})
	t.Cleanup(fake.Close)
	fake.AddRepo("acme", "app", "main")
	hc := &http.Client{Timeout: 10 * time.Second}
	if before != nil {
		hc.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
			before(r)
			return http.DefaultTransport.RoundTrip(r)
		})
	}
	lookup := func(name string) (string, bool) {
		if name == "GH_TOKEN" {
			return token, true
		}
		return "", false
	}
	return env{
		fake: fake, clk: clk, ctx: t.Context(),
		f:    New(Options{HTTPClient: hc, Secrets: envs(lookup), Clock: clk}),
		repo: forge.Repo{URL: "https://github.com/acme/app.git", DefaultBranch: "main", APIURL: fake.URL, CredentialsRef: "env:GH_TOKEN"},
	}
}

// pushed pushes branch at a commit made from seed and returns the commit.
func (e env) pushed(branch, seed string) string {
	sha := githubfake.SHA(seed)
	e.fake.Push("acme", "app", branch, sha)
	return sha
}

func (e env) ensure(t *testing.T, branch string) forge.PullRequest {
	t.Helper()
	pr, err := e.f.EnsurePullRequest(e.ctx, e.repo, branch, "ACME-1: do it", "body\n\n"+forge.Marker("ACME-1", "flow-1"))
	if err != nil {
		t.Fatalf("EnsurePullRequest: %v", err)
	}
	return pr
}

func (e env) state(t *testing.T, pr forge.PullRequest) forge.State {
	t.Helper()
	st, err := e.f.State(e.ctx, e.repo, pr)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	return st
}

// settled reads the state until GitHub has computed the mergeability of
// an open pull request.
func (e env) settled(t *testing.T, pr forge.PullRequest) forge.State {
	t.Helper()
	for range 5 {
		if st := e.state(t, pr); st.Mergeable != nil || !st.Open {
			return st
		}
	}
	t.Fatal("mergeable stayed null")
	return forge.State{}
}

// TestNewDefaults: without options a call is bounded at 30 seconds, no
// credentials reference resolves (the platform's policy is not given) and
// time comes from the real clock.
func TestNewDefaults(t *testing.T) {
	t.Setenv("ACME_GITHUB_TEST_TOKEN", "x")
	f := New(Options{})
	if f.http.Timeout != 30*time.Second {
		t.Errorf("timeout %v, want 30s", f.http.Timeout)
	}
	if v, err := f.secrets.Resolve("acme", "env:ACME_GITHUB_TEST_TOKEN"); err == nil {
		t.Errorf("a reference resolved to %q without a policy", v)
	}
	if _, ok := f.clock.(clock.Real); !ok {
		t.Errorf("clock %T, want clock.Real", f.clock)
	}
}

func TestLocate(t *testing.T) {
	tests := []struct {
		url, api          string
		owner, name, base string
		wantErr           string
	}{
		{url: "https://github.com/acme/app.git", owner: "acme", name: "app", base: "https://api.github.com/"},
		{url: "https://github.com/acme/app", owner: "acme", name: "app", base: "https://api.github.com/"},
		{url: "https://GitHub.com/acme/app/", owner: "acme", name: "app", base: "https://api.github.com/"},
		{url: "https://ghe.example.com/acme/app.git", owner: "acme", name: "app", base: "https://ghe.example.com/api/v3/"},
		{url: "http://127.0.0.1:8080/acme/app", owner: "acme", name: "app", base: "http://127.0.0.1:8080/api/v3/"},
		{url: "https://github.com/acme/app.git", api: "http://127.0.0.1:9/x", owner: "acme", name: "app", base: "http://127.0.0.1:9/x/"},
		{url: "https://github.com/acme", wantErr: "repository.url"},
		{url: "https://github.com/acme/app/extra", wantErr: "repository.url"},
		{url: "https://github.com/acme/.git", wantErr: "repository.url"},
		{url: "https://github.com/-acme/app", wantErr: "does not name"},
		{url: "git@github.com:acme/app.git", wantErr: "repository.url"},
		{url: "https://user:pw@github.com/acme/app", wantErr: "credentials"},
		{url: "https://github.com/acme/app", api: "ftp://x/", wantErr: "repository.api_url"},
		{url: "https://github.com/acme/app", api: "https://u:p@x/", wantErr: "repository.api_url"},
	}
	for _, tt := range tests {
		owner, name, api, err := Locate(tt.url, tt.api)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Locate(%q, %q) = %v, want an error with %q", tt.url, tt.api, err, tt.wantErr)
			}
			continue
		}
		if err != nil || owner != tt.owner || name != tt.name || api.String() != tt.base {
			t.Errorf("Locate(%q, %q) = %q, %q, %v, %v; want %q, %q, %q", tt.url, tt.api, owner, name, api, err, tt.owner, tt.name, tt.base)
		}
	}
}

func TestRequestsCarryBearerAcceptAndVersion(t *testing.T) {
	var seen http.Header
	e := setup(t, func(r *http.Request) { seen = r.Header.Clone() })
	e.pushed("ballet/ACME-1", "a1")
	e.ensure(t, "ballet/ACME-1")
	if got := seen.Get("Authorization"); got != "Bearer "+token {
		t.Errorf("Authorization = %q", got)
	}
	if got := seen.Get("Accept"); got != "application/vnd.github+json" {
		t.Errorf("Accept = %q", got)
	}
	if got := seen.Get("X-GitHub-Api-Version"); got != "2022-11-28" {
		t.Errorf("X-GitHub-Api-Version = %q", got)
	}
}

func TestEnsureOpensOnceThenAdopts(t *testing.T) {
	e := setup(t, nil)
	head := e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	if pr.Number != 1 || pr.Branch != "ballet/ACME-1" || pr.Base != "main" || pr.HeadSHA != head || pr.URL == "" {
		t.Fatalf("opened %+v", pr)
	}
	again := e.ensure(t, "ballet/ACME-1")
	if again != pr {
		t.Fatalf("second ensure = %+v, want %+v", again, pr)
	}
	prs := e.fake.PullRequests("acme", "app")
	if len(prs) != 1 || !forge.HasMarker(prs[0].Body) || prs[0].Title != "ACME-1: do it" {
		t.Fatalf("pull requests %+v, want one with the marker", prs)
	}
	if n := e.fake.Calls()["POST /repos/{owner}/{repo}/pulls"]; n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
}

func TestEnsureAdoptsAPullRequestOpenedByHand(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	n := e.fake.OpenPullRequest("acme", "app", "ballet/ACME-1", "main", "by hand", "no marker")
	if pr := e.ensure(t, "ballet/ACME-1"); pr.Number != n {
		t.Fatalf("adopted #%d, want #%d", pr.Number, n)
	}
	if len(e.fake.PullRequests("acme", "app")) != 1 {
		t.Fatal("a second pull request was opened")
	}
}

func TestEnsureAdoptsAMergedPullRequestAtTheBranchHead(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.MergeByHand("acme", "app", pr.Number)
	// Ballet merged, then crashed before recording it: ensure adopts it.
	if again := e.ensure(t, "ballet/ACME-1"); again.Number != pr.Number {
		t.Fatalf("adopted #%d, want the merged #%d", again.Number, pr.Number)
	}
	// A new iteration of the ticket pushes new work: a new pull request.
	e.pushed("ballet/ACME-1", "a2")
	if next := e.ensure(t, "ballet/ACME-1"); next.Number != 2 {
		t.Fatalf("got #%d, want a new #2 for new work", next.Number)
	}
}

func TestEnsureBranchNotPushed(t *testing.T) {
	e := setup(t, nil)
	_, err := e.f.EnsurePullRequest(e.ctx, e.repo, "ballet/ACME-9", "t", "b")
	if !errors.Is(err, forge.ErrBranchNotPushed) {
		t.Fatalf("err = %v, want ErrBranchNotPushed", err)
	}
	if len(e.fake.PullRequests("acme", "app")) != 0 {
		t.Fatal("opened a pull request")
	}
}

func TestEnsureInvalidBranch(t *testing.T) {
	e := setup(t, nil)
	for _, b := range []string{"", "-x", "a..b", "a b"} {
		if _, err := e.f.EnsurePullRequest(e.ctx, e.repo, b, "t", "b"); !errors.Is(err, forge.ErrInvalidBranch) {
			t.Errorf("%q: err = %v, want ErrInvalidBranch", b, err)
		}
	}
	if n := e.fake.TotalCalls(); n != 0 {
		t.Fatalf("%d calls for invalid branches", n)
	}
}

// A concurrent opener (Ballet before a crash, still running; or a person)
// opens the pull request between the list and the create: GitHub's 422
// duplicate is adopted.
func TestEnsure422DuplicateIsAdopted(t *testing.T) {
	var e env
	raced := false
	e = setup(t, func(r *http.Request) {
		if r.Method == http.MethodPost && !raced {
			raced = true
			e.fake.OpenPullRequest("acme", "app", "ballet/ACME-1", "main", "racer", "")
		}
	})
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	if !raced || pr.Number != 1 {
		t.Fatalf("raced=%v, got #%d, want the racer's #1", raced, pr.Number)
	}
	if n := len(e.fake.PullRequests("acme", "app")); n != 1 {
		t.Fatalf("%d pull requests, want 1", n)
	}
	if n := e.fake.Calls()["GET /repos/{owner}/{repo}/pulls"]; n != 2 {
		t.Fatalf("%d lists, want 2 (before the create, after the 422)", n)
	}
}

func TestEnsure422MissingHeadIsBranchNotPushed(t *testing.T) {
	var e env
	e = setup(t, func(r *http.Request) {
		if r.Method == http.MethodPost {
			e.fake.DeleteBranch("acme", "app", "ballet/ACME-1")
		}
	})
	e.pushed("ballet/ACME-1", "a1")
	_, err := e.f.EnsurePullRequest(e.ctx, e.repo, "ballet/ACME-1", "t", "b")
	if !errors.Is(err, forge.ErrBranchNotPushed) {
		t.Fatalf("err = %v, want ErrBranchNotPushed", err)
	}
}

func TestEnsure422OtherIsAPlainError(t *testing.T) {
	e := setup(t, nil)
	e.fake.Push("acme", "app", "ballet/ACME-1", mainHead(t, e)) // no commits of its own
	_, err := e.f.EnsurePullRequest(e.ctx, e.repo, "ballet/ACME-1", "t", "b")
	if err == nil || errors.Is(err, forge.ErrBranchNotPushed) || !strings.Contains(err.Error(), "No commits between main and ballet/ACME-1") {
		t.Fatalf("err = %v, want GitHub's message", err)
	}
}

func mainHead(t *testing.T, e env) string {
	sha, ok := e.fake.Branch("acme", "app", "main")
	if !ok {
		t.Fatal("no main")
	}
	return sha
}

func TestStateMergeableNullThenComputed(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	st := e.state(t, pr)
	if st.Mergeable != nil || !st.Open || !st.BranchPushed {
		t.Fatalf("first read: %+v, want open with mergeable unknown", st)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionWait || d.Waiting != forge.WaitChecks {
		t.Fatalf("decided %+v on unknown mergeability", d)
	}
	st = e.state(t, pr)
	if st.Mergeable == nil || !*st.Mergeable {
		t.Fatalf("second read: mergeable %v, want true", st.Mergeable)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionMerge {
		t.Fatalf("decided %+v", d)
	}
	// A push makes GitHub compute it again.
	e.pushed("ballet/ACME-1", "a2")
	if st := e.state(t, pr); st.Mergeable != nil || st.HeadSHA != githubfake.SHA("a2") {
		t.Fatalf("after a push: %+v, want the new head, mergeable unknown", st)
	}
}

func TestStateConflictAndMergeableStates(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.SetConflict("acme", "app", pr.Number, true)
	if st := e.settled(t, pr); *st.Mergeable {
		t.Fatal("a conflict (dirty) read as mergeable")
	}
	e.fake.SetConflict("acme", "app", pr.Number, false)
	for _, ms := range []string{"blocked", "behind", "unstable", "has_hooks", "clean"} {
		e.fake.SetMergeableState("acme", "app", pr.Number, ms)
		if st := e.settled(t, pr); !*st.Mergeable {
			t.Errorf("%s read as a conflict", ms)
		}
	}
	for _, c := range []struct {
		state string
		want  *bool
	}{
		{"dirty", gh.Ptr(false)}, {"unknown", nil}, {"clean", gh.Ptr(true)},
	} {
		got := mergeable(&gh.PullRequest{Mergeable: gh.Ptr(true), MergeableState: gh.Ptr(c.state)})
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("mergeable(true, %s) = %v", c.state, got)
		}
	}
}

func TestStateNoStatusesIsNone(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	st := e.settled(t, pr)
	if st.Checks != forge.ChecksNone || len(st.PendingChecks) != 0 {
		t.Fatalf("checks %q pending %v: GitHub's pending with total_count 0 means none", st.Checks, st.PendingChecks)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionMerge {
		t.Fatalf("decided %+v", d)
	}
	// A required check that never reported is pending, not none.
	d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto, RequiredChecks: []string{"ci"}}, true, st)
	if d.Action != forge.ActionWait || d.Waiting != forge.WaitChecks || !strings.Contains(d.Reason, "ci") {
		t.Fatalf("decided %+v, want waiting for ci", d)
	}
}

func TestStateChecksMergeStatusesAndCheckRuns(t *testing.T) {
	e := setup(t, nil)
	head := e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.SetStatus("acme", "app", head, "ci/lint", "success")
	e.fake.SetCheckRun("acme", "app", head, "build", "in_progress", "")
	st := e.settled(t, pr)
	if st.Checks != forge.ChecksPending || fmt.Sprint(st.PendingChecks) != "[build]" || fmt.Sprint(st.PassedChecks) != "[ci/lint]" {
		t.Fatalf("state %+v", st)
	}
	e.fake.SetCheckRun("acme", "app", head, "build", "completed", "failure")
	e.fake.SetCheckRun("acme", "app", head, "docs", "completed", "skipped")
	st = e.state(t, pr)
	if st.Checks != forge.ChecksFailure || fmt.Sprint(st.FailingChecks) != "[build]" || fmt.Sprint(st.PassedChecks) != "[ci/lint docs]" {
		t.Fatalf("state %+v", st)
	}
	d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st)
	if d.Action != forge.ActionFailed || !strings.Contains(d.Reason, "build") {
		t.Fatalf("decided %+v, want failed naming build", d)
	}
}

func TestCombineChecks(t *testing.T) {
	run := func(name, status, conclusion string) *gh.CheckRun {
		r := &gh.CheckRun{Name: gh.Ptr(name), Status: gh.Ptr(status)}
		if conclusion != "" {
			r.Conclusion = gh.Ptr(conclusion)
		}
		return r
	}
	status := func(ctx, state string) *gh.RepoStatus {
		return &gh.RepoStatus{Context: gh.Ptr(ctx), State: gh.Ptr(state)}
	}
	tests := []struct {
		name                     string
		statuses                 []*gh.RepoStatus
		runs                     []*gh.CheckRun
		checks, fail, pend, pass string
	}{
		{"nothing", nil, nil, forge.ChecksNone, "[]", "[]", "[]"},
		{"success neutral skipped pass", nil, []*gh.CheckRun{run("a", "completed", "success"), run("b", "completed", "neutral"), run("c", "completed", "skipped")}, forge.ChecksSuccess, "[]", "[]", "[a b c]"},
		{"failing conclusions", nil, []*gh.CheckRun{run("a", "completed", "failure"), run("b", "completed", "timed_out"), run("c", "completed", "cancelled"), run("d", "completed", "action_required"), run("e", "completed", "startup_failure"), run("f", "completed", "stale")}, forge.ChecksFailure, "[a b c d e f]", "[]", "[]"},
		{"queued and in progress pend", nil, []*gh.CheckRun{run("a", "queued", ""), run("b", "in_progress", ""), run("c", "waiting", "")}, forge.ChecksPending, "[]", "[a b c]", "[]"},
		{"names sorted, whatever the order", nil, []*gh.CheckRun{run("h", "queued", ""), run("g", "queued", ""), run("f", "queued", ""), run("e", "queued", ""), run("d", "queued", ""), run("c", "queued", ""), run("b", "queued", ""), run("a", "queued", "")}, forge.ChecksPending, "[]", "[a b c d e f g h]", "[]"},
		{"statuses", []*gh.RepoStatus{status("s1", "success"), status("s2", "pending"), status("s3", "error"), status("s4", "failure")}, nil, forge.ChecksFailure, "[s3 s4]", "[s2]", "[s1]"},
		{"same name: the worst wins", []*gh.RepoStatus{status("ci", "success")}, []*gh.CheckRun{run("ci", "completed", "failure")}, forge.ChecksFailure, "[ci]", "[]", "[]"},
		{"same name: pending beats passed", []*gh.RepoStatus{status("ci", "pending")}, []*gh.CheckRun{run("ci", "completed", "success")}, forge.ChecksPending, "[]", "[ci]", "[]"},
	}
	for _, tt := range tests {
		checks, fail, pend, pass := combineChecks(tt.statuses, tt.runs)
		got := fmt.Sprint(checks, fmtList(fail), fmtList(pend), fmtList(pass))
		want := fmt.Sprint(tt.checks, tt.fail, tt.pend, tt.pass)
		if got != want {
			t.Errorf("%s: got %s, want %s", tt.name, got, want)
		}
	}
}

func fmtList(s []string) string { return fmt.Sprint(append([]string{}, s...)) }

func TestStateReviewsLatestPerCollaboratorWins(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	add := func(user, assoc, state, body string) int64 {
		e.clk.Advance(time.Minute)
		return e.fake.AddReview("acme", "app", pr.Number, user, assoc, state, body)
	}
	add("alice", "MEMBER", "CHANGES_REQUESTED", "rename it")
	add("alice", "MEMBER", "APPROVED", "")                                           // alice's latest: approves
	add("alice", "MEMBER", "COMMENTED", "nice")                                      // a comment changes nothing
	add("bob", "COLLABORATOR", "APPROVED", "")                                       //
	add("bob", "COLLABORATOR", "CHANGES_REQUESTED", "add a test for the empty case") // bob's latest: changes
	add("mallory", "NONE", "APPROVED", "")                                           // not a collaborator: does not count
	add("eve", "CONTRIBUTOR", "CHANGES_REQUESTED", "no")                             // nor does this
	add("carol", "OWNER", "APPROVED", "")
	carol := add("carol", "OWNER", "APPROVED", "")
	e.fake.DismissReview("acme", "app", pr.Number, carol) // dismissed: carol's verdict is gone
	st := e.settled(t, pr)
	if st.Approvals != 1 || !st.ChangesRequested || fmt.Sprint(st.ChangeRequests) != "[bob: add a test for the empty case]" {
		t.Fatalf("approvals %d, changes %v %q", st.Approvals, st.ChangesRequested, st.ChangeRequests)
	}
	d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 1}, true, st)
	if d.Action != forge.ActionFailed || !strings.Contains(d.Reason, "bob: add a test") {
		t.Fatalf("decided %+v", d)
	}
	add("bob", "COLLABORATOR", "APPROVED", "ok now")
	st = e.state(t, pr)
	if st.Approvals != 2 || st.ChangesRequested {
		t.Fatalf("after bob approves: approvals %d, changes %v", st.Approvals, st.ChangesRequested)
	}
	// mallory's approval alone never satisfies a policy.
	d = forge.Decide(forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 3}, true, st)
	if d.Action != forge.ActionWait || d.Waiting != forge.WaitReview {
		t.Fatalf("decided %+v, want waiting for review", d)
	}
}

func TestStateReadsEveryPage(t *testing.T) {
	e := setup(t, nil)
	head := e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	for i := range 130 {
		e.fake.SetCheckRun("acme", "app", head, fmt.Sprintf("run-%03d", i), "completed", "success")
		e.fake.SetStatus("acme", "app", head, fmt.Sprintf("status-%03d", i), "success")
		e.fake.AddReview("acme", "app", pr.Number, fmt.Sprintf("user%03d", i), "MEMBER", "APPROVED", "")
	}
	e.fake.SetCheckRun("acme", "app", head, "zz-last", "completed", "failure")
	st := e.settled(t, pr)
	if st.Approvals != 130 || len(st.PassedChecks) != 260 || fmt.Sprint(st.FailingChecks) != "[zz-last]" {
		t.Fatalf("approvals %d, passed %d, failing %v: pages were missed", st.Approvals, len(st.PassedChecks), st.FailingChecks)
	}
}

func TestStateClosedAndDeleted(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.ClosePullRequest("acme", "app", pr.Number)
	st := e.state(t, pr)
	if !st.Closed || st.Open || st.Merged || !st.BranchPushed {
		t.Fatalf("closed by hand: %+v", st)
	}
	e.fake.DeleteBranch("acme", "app", "ballet/ACME-1")
	st = e.state(t, pr)
	if !st.Closed || st.BranchPushed {
		t.Fatalf("branch deleted: %+v", st)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionFailed || !strings.Contains(d.Reason, "deleted") {
		t.Fatalf("decided %+v", d)
	}
}

func TestDeletingTheHeadBranchClosesTheOpenPullRequest(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.DeleteBranch("acme", "app", "ballet/ACME-1")
	if st := e.state(t, pr); !st.Closed || st.BranchPushed {
		t.Fatalf("%+v", st)
	}
}

func TestMergeAtTheDecidedHead(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	st := e.settled(t, pr)
	pr.HeadSHA = st.HeadSHA
	if err := e.f.Merge(e.ctx, e.repo, pr); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	got := e.fake.PullRequests("acme", "app")[0]
	if !got.Merged || got.Merges != 1 || got.MergedSHA != st.HeadSHA {
		t.Fatalf("fake holds %+v", got)
	}
	st = e.state(t, pr)
	if !st.Merged || st.Open || st.Closed {
		t.Fatalf("after merge: %+v", st)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionDone {
		t.Fatalf("decided %+v", d)
	}
	// A crash between "merge requested" and "recorded": merging again at the
	// same head succeeds without merging twice.
	if err := e.f.Merge(e.ctx, e.repo, pr); err != nil {
		t.Fatalf("second Merge: %v", err)
	}
	if got := e.fake.PullRequests("acme", "app")[0]; got.Merges != 1 {
		t.Fatalf("merged %d times", got.Merges)
	}
}

func TestMergeStaleHeadIsOutOfDateAndMergesNothing(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	decided := e.settled(t, pr)
	e.pushed("ballet/ACME-1", "a2") // a push after the decision
	pr.HeadSHA = decided.HeadSHA
	err := e.f.Merge(e.ctx, e.repo, pr)
	if !errors.Is(err, forge.ErrOutOfDate) {
		t.Fatalf("err = %v, want ErrOutOfDate", err)
	}
	if got := e.fake.PullRequests("acme", "app")[0]; got.Merged || got.Merges != 0 {
		t.Fatalf("merged anyway: %+v", got)
	}
}

func TestMergeRefusedIsNotMergeable(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(e env, n int)
	}{
		{"conflict", func(e env, n int) { e.fake.SetConflict("acme", "app", n, true) }},
		{"blocked by protection", func(e env, n int) { e.fake.SetMergeableState("acme", "app", n, "blocked") }},
		{"behind", func(e env, n int) { e.fake.SetMergeableState("acme", "app", n, "behind") }},
		{"closed", func(e env, n int) { e.fake.ClosePullRequest("acme", "app", n) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, nil)
			e.pushed("ballet/ACME-1", "a1")
			pr := e.ensure(t, "ballet/ACME-1")
			c.set(e, pr.Number)
			err := e.f.Merge(e.ctx, e.repo, pr)
			if !errors.Is(err, forge.ErrNotMergeable) {
				t.Fatalf("err = %v, want ErrNotMergeable", err)
			}
			if got := e.fake.PullRequests("acme", "app")[0]; got.Merged {
				t.Fatal("merged")
			}
		})
	}
}

func TestMergeAlreadyMergedElsewhereIsOutOfDate(t *testing.T) {
	e := setup(t, nil)
	first := e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	e.pushed("ballet/ACME-1", "a2")
	e.fake.MergeByHand("acme", "app", pr.Number) // a person merged the newer head
	pr.HeadSHA = first
	if err := e.f.Merge(e.ctx, e.repo, pr); !errors.Is(err, forge.ErrOutOfDate) {
		t.Fatalf("err = %v, want ErrOutOfDate", err)
	}
	if got := e.fake.PullRequests("acme", "app")[0]; got.Merges != 1 {
		t.Fatalf("merged %d times", got.Merges)
	}
}

func TestMergeRefusesANonCommitHead(t *testing.T) {
	e := setup(t, nil)
	if err := e.f.Merge(e.ctx, e.repo, forge.PullRequest{Number: 1, HeadSHA: "main"}); err == nil || e.fake.TotalCalls() != 0 {
		t.Fatalf("err = %v after %d calls", err, e.fake.TotalCalls())
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	e.pushed("ballet/ACME-2", "b1")
	pr := e.ensure(t, "ballet/ACME-1")
	for range 2 {
		if err := e.f.Close(e.ctx, e.repo, pr); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if got := e.fake.PullRequests("acme", "app")[0]; got.Open || got.Merged {
		t.Fatalf("%+v", got)
	}
	merged := e.ensure(t, "ballet/ACME-2")
	e.fake.MergeByHand("acme", "app", merged.Number)
	if err := e.f.Close(e.ctx, e.repo, merged); err != nil {
		t.Fatalf("Close of a merged one: %v", err)
	}
	if err := e.f.Close(e.ctx, e.repo, forge.PullRequest{Branch: "never-opened"}); err != nil {
		t.Fatalf("Close of none: %v", err)
	}
}

func TestRateLimitsAreRateLimitedErrors(t *testing.T) {
	until := start.Add(17 * time.Minute)
	for _, c := range []struct {
		name string
		kind githubfake.RateLimitKind
	}{
		{"429", githubfake.Limit429},
		{"403 primary", githubfake.LimitPrimary},
		{"403 secondary with Retry-After", githubfake.LimitSecondary},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, nil)
			e.pushed("ballet/ACME-1", "a1")
			pr := e.ensure(t, "ballet/ACME-1")
			calls := []func() error{
				func() error { _, err := e.f.EnsurePullRequest(e.ctx, e.repo, "ballet/ACME-1", "t", "b"); return err },
				func() error { _, err := e.f.State(e.ctx, e.repo, pr); return err },
				func() error { return e.f.Merge(e.ctx, e.repo, pr) },
				func() error { return e.f.Close(e.ctx, e.repo, pr) },
			}
			for i, call := range calls {
				e.fake.RateLimit(c.kind, until, 1)
				err := call()
				var rl *forge.RateLimitedError
				if !errors.As(err, &rl) || !rl.Until.Equal(until) {
					t.Fatalf("call %d: err = %v, want RateLimitedError until %v", i, err, until)
				}
			}
			if got := e.fake.PullRequests("acme", "app")[0]; got.Merged || !got.Open {
				t.Fatalf("a rate-limited call acted: %+v", got)
			}
		})
	}
}

func TestSecondaryLimitWithoutHeadersWaitsAMinute(t *testing.T) {
	e := setup(t, nil)
	r := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}}
	err := e.newClient(t).fail("x", &gh.Response{Response: r}, &gh.ErrorResponse{Response: r, Message: "You have exceeded a secondary rate limit."})
	var rl *forge.RateLimitedError
	if !errors.As(err, &rl) || !rl.Until.Equal(start.Add(time.Minute)) {
		t.Fatalf("err = %v, want rate limited for a minute", err)
	}
	// A plain 403 (no permission) is not a rate limit.
	err = e.newClient(t).fail("x", &gh.Response{Response: r}, &gh.ErrorResponse{Response: r, Message: "Resource not accessible by integration"})
	if errors.As(err, &rl) {
		t.Fatalf("a plain 403 read as a rate limit: %v", err)
	}
}

func (e env) newClient(t *testing.T) *client {
	c, err := e.f.client(e.repo)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServerErrorsAreWrappedErrors(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	pr := e.ensure(t, "ballet/ACME-1")
	for _, code := range []int{500, 502, 503} {
		e.fake.Fail(code, 1)
		err := e.f.Merge(e.ctx, e.repo, pr)
		var rl *forge.RateLimitedError
		if err == nil || errors.As(err, &rl) || errors.Is(err, forge.ErrNotMergeable) || errors.Is(err, forge.ErrOutOfDate) ||
			!strings.Contains(err.Error(), fmt.Sprint(code)) || !strings.Contains(err.Error(), "merging pull request #1") {
			t.Fatalf("%d: err = %v, want a plain wrapped error", code, err)
		}
	}
	if got := e.fake.PullRequests("acme", "app")[0]; got.Merged {
		t.Fatal("merged on a 5xx")
	}
	// A transport failure (timeout, refused) is a wrapped error too.
	e.fake.Close()
	if _, err := e.f.State(e.ctx, e.repo, pr); err == nil || !strings.Contains(err.Error(), "github: reading pull request #1") {
		t.Fatalf("err = %v", err)
	}
}

func TestTheTokenNeverShows(t *testing.T) {
	e := setup(t, nil)
	e.pushed("ballet/ACME-1", "a1")
	wrong := e.repo
	wrong.CredentialsRef = "env:WRONG"
	f := New(Options{Secrets: envs(func(string) (string, bool) { return "ghp_WRONGtoken", true }), Clock: e.clk})
	_, err := f.EnsurePullRequest(e.ctx, wrong, "ballet/ACME-1", "t", "b")
	if err == nil || strings.Contains(err.Error(), "ghp_WRONGtoken") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want a 401 without the token", err)
	}
	missing := New(Options{Secrets: envs(func(string) (string, bool) { return "", false })})
	_, err = missing.EnsurePullRequest(e.ctx, e.repo, "ballet/ACME-1", "t", "b")
	if !errors.Is(err, forge.ErrCredentialMissing) || !strings.Contains(err.Error(), "GH_TOKEN") {
		t.Fatalf("err = %v, want the missing credential named", err)
	}
	none := e.repo
	none.CredentialsRef = ""
	if _, err := e.f.EnsurePullRequest(e.ctx, none, "ballet/ACME-1", "t", "b"); err == nil || !strings.Contains(err.Error(), "credentials_ref") {
		t.Fatalf("err = %v, want credentials_ref named", err)
	}
}

// TestForgeCallsPerMergedTicket counts the calls of the merge stage's
// happy path: ensure, one poll while GitHub computes mergeability, one that
// decides to merge, the merge, the read that records it.
func TestForgeCallsPerMergedTicket(t *testing.T) {
	e := setup(t, nil)
	head := e.pushed("ballet/ACME-1", "a1")
	e.fake.SetCheckRun("acme", "app", head, "build", "completed", "success")
	pr := e.ensure(t, "ballet/ACME-1")
	e.fake.AddReview("acme", "app", pr.Number, "alice", "MEMBER", "APPROVED", "")
	policy := forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 1, RequiredChecks: []string{"build"}}
	for range 3 {
		st := e.state(t, pr)
		switch d := forge.Decide(policy, true, st); d.Action {
		case forge.ActionWait:
			continue
		case forge.ActionMerge:
			pr.HeadSHA = st.HeadSHA
			if err := e.f.Merge(e.ctx, e.repo, pr); err != nil {
				t.Fatal(err)
			}
		case forge.ActionDone:
		default:
			t.Fatalf("decided %+v", d)
		}
	}
	if got := e.fake.PullRequests("acme", "app")[0]; !got.Merged {
		t.Fatal("not merged")
	}
	// ensure 3 (branch, list, create) + 2 polls × 4 (pull, status, check
	// runs, reviews) + merge 1 + the recording read 1.
	if n := e.fake.TotalCalls(); n != 13 {
		t.Fatalf("%d calls per merged ticket, want 13: %v", n, e.fake.Calls())
	}
	t.Logf("forge calls per merged ticket: %d %v", e.fake.TotalCalls(), e.fake.Calls())
}

// The fault points kill the process around the forge calls; a restarted
// caller then neither opens a second pull request nor merges twice.
func TestKilledAroundForgeCallsActsOnce(t *testing.T) {
	if url := os.Getenv("GITHUB_FAKE_CHILD"); url != "" {
		child(url)
		return
	}
	for _, point := range []string{"github.create_pr.before", "github.create_pr.after", "github.merge.before", "github.merge.after", "github.state.after"} {
		t.Run(point, func(t *testing.T) {
			e := setup(t, nil)
			e.pushed("ballet/ACME-1", "a1")
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledAroundForgeCallsActsOnce$")
			cmd.Env = append(os.Environ(), "GITHUB_FAKE_CHILD="+e.fake.URL, "GH_TOKEN="+token, fault.EnvVar+"="+point)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
				t.Fatalf("child: %v, want killed at %s\n%s", err, point, out)
			}
			// The restarted merge stage: ensure, read, merge.
			pr := e.ensure(t, "ballet/ACME-1")
			st := e.settled(t, pr)
			if !st.Merged {
				pr.HeadSHA = st.HeadSHA
				if err := e.f.Merge(e.ctx, e.repo, pr); err != nil {
					t.Fatalf("Merge after the kill: %v", err)
				}
			}
			prs := e.fake.PullRequests("acme", "app")
			if len(prs) != 1 || !prs[0].Merged || prs[0].Merges != 1 {
				t.Fatalf("after a kill at %s: %+v, want one pull request merged once", point, prs)
			}
		})
	}
}

// child runs the merge stage's calls against the parent's fake until a
// fault point kills it.
func child(url string) {
	f := New(Options{Secrets: envs(nil)})
	repo := forge.Repo{URL: "https://github.com/acme/app", DefaultBranch: "main", APIURL: url, CredentialsRef: "env:GH_TOKEN"}
	ctx := context.Background()
	pr, err := f.EnsurePullRequest(ctx, repo, "ballet/ACME-1", "t", forge.Marker("ACME-1", "flow-1"))
	if err != nil {
		os.Exit(2)
	}
	for range 5 {
		st, err := f.State(ctx, repo, pr)
		if err != nil {
			os.Exit(3)
		}
		if st.Mergeable != nil {
			pr.HeadSHA = st.HeadSHA
			break
		}
	}
	_ = f.Merge(ctx, repo, pr)
	os.Exit(0) // not killed: the parent fails
}

// A redirect (to another host: a renamed repository, a compromised proxy;
// or to another path of the API host) is never followed: the client holds
// the token, and the call fails on the 3xx.
func TestTheTokenNeverFollowsARedirect(t *testing.T) {
	e := setup(t, nil)
	got := make(chan string, 10)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNotFound)
	}))
	defer elsewhere.Close()
	var sameHost, redirects atomic.Int32
	// moves redirects to another host, or (same) to another path of its own.
	moves := func(same bool) *httptest.Server {
		var srv *httptest.Server
		srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/moved") {
				sameHost.Add(1)
				w.WriteHeader(http.StatusNotFound)
				return
			}
			redirects.Add(1)
			target := elsewhere.URL
			if same {
				target = srv.URL + "/moved"
			}
			http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	for _, same := range []bool{false, true} {
		repo := e.repo
		repo.APIURL = moves(same).URL
		if _, err := e.f.State(e.ctx, repo, forge.PullRequest{Number: 1, Branch: "b"}); err == nil {
			t.Fatalf("same host %v: State through a redirect succeeded", same)
		}
	}
	if redirects.Load() < 2 {
		t.Fatal("no call met a redirect: the test proves nothing")
	}
	select {
	case auth := <-got:
		t.Fatalf("the redirect to another host was followed (Authorization %q)", auth)
	default:
	}
	if n := sameHost.Load(); n != 0 {
		t.Fatalf("a redirect on the API host was followed %d times", n)
	}
}

// envs is a policy that lets every variable of lookup resolve (the tests'
// own environment; the platform's policy is tested in internal/secret).
func envs(lookup func(string) (string, bool)) *secret.Policy {
	return &secret.Policy{Allow: []string{"env:*"}, LookupEnv: lookup}
}

// TestAnotherOrganizationsCredentialIsRefused: a repository of
// organization acme whose credentials_ref names globex's token (under
// env:GH_{ORG}_TOKEN) is refused at use, naming the field, and nothing is
// sent.
func TestAnotherOrganizationsCredentialIsRefused(t *testing.T) {
	var sent atomic.Int32
	hc := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent.Add(1)
		return nil, errors.New("nothing may be sent")
	})}
	policy := &secret.Policy{Allow: []string{"env:GH_{ORG}_TOKEN"}, LookupEnv: func(string) (string, bool) { return "ghp_globex", true }}
	f := New(Options{HTTPClient: hc, Secrets: policy})
	repo := forge.Repo{URL: "https://github.com/acme/app", DefaultBranch: "main", CredentialsRef: "env:GH_GLOBEX_TOKEN", Organization: "acme"}
	_, err := f.EnsurePullRequest(context.Background(), repo, "ballet/ACME-1", "t", "b")
	if !errors.Is(err, secret.ErrRefused) || !strings.Contains(err.Error(), "repository.credentials_ref") || strings.Contains(err.Error(), "ghp_globex") {
		t.Fatalf("err = %v, want refused, naming repository.credentials_ref", err)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	repo.Organization, repo.CredentialsRef = "globex", "env:GH_GLOBEX_TOKEN"
	if _, err := f.EnsurePullRequest(context.Background(), repo, "ballet/ACME-1", "t", "b"); errors.Is(err, secret.ErrRefused) || sent.Load() == 0 {
		t.Fatalf("globex's own credential: %v, %d requests", err, sent.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
