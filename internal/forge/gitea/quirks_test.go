package gitea

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

// TestBranchProtectionRefusesLikeAPolicy: a protection asking for a status
// and an approval makes Gitea refuse Ballet's merge (ErrNotMergeable,
// nothing merged) exactly while Decide, under the same policy, would wait.
func TestBranchProtectionRefusesLikeAPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.NewRepo(t).(*repo)
	r.g.ProtectBranch(t, "main", []string{"ci/test"}, 1)
	ctx := context.Background()
	policy := forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 1, RequiredChecks: []string{"ci/test"}}
	sha := r.Push(t, "ballet/ACME-1")
	pr, err := h.f.EnsurePullRequest(ctx, r.Repo(), "ballet/ACME-1", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	refused := func(want string) {
		t.Helper()
		st, err := h.f.State(ctx, r.Repo(), pr)
		if err != nil {
			t.Fatal(err)
		}
		if d := forge.Decide(policy, true, st); d.Action != forge.ActionWait || d.Waiting != want {
			t.Fatalf("Decide: %+v, want wait %s", d, want)
		}
		if err := h.f.Merge(ctx, r.Repo(), pr); !errors.Is(err, forge.ErrNotMergeable) {
			t.Fatalf("Merge under the protection: %v, want ErrNotMergeable", err)
		}
		if n := r.MergesOf(t, sha); n != 0 {
			t.Fatalf("merged %d times under the protection", n)
		}
	}
	refused(forge.WaitChecks)
	r.SetStatus(t, sha, "ci/test", "success")
	refused(forge.WaitReview)
	r.Review(t, pr, 0, true, "ok")
	st, err := h.f.State(ctx, r.Repo(), pr)
	if err != nil {
		t.Fatal(err)
	}
	if d := forge.Decide(policy, true, st); d.Action != forge.ActionMerge {
		t.Fatalf("Decide with the status and the approval: %+v (%+v)", d, st)
	}
	if err := h.f.Merge(ctx, r.Repo(), pr); err != nil {
		t.Fatalf("Merge with the status and the approval: %v", err)
	}
	if n := r.MergesOf(t, sha); n != 1 {
		t.Fatalf("%d merges, want 1", n)
	}
}

// TestReviewsThatDoNotCount: a user without write access, and a dismissed
// review, neither approve nor request changes.
func TestReviewsThatDoNotCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.NewRepo(t).(*repo)
	ctx := context.Background()
	r.Push(t, "ballet/ACME-1")
	pr, err := h.f.EnsurePullRequest(ctx, r.Repo(), "ballet/ACME-1", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	stranger := h.srv.CreateUser(t, "stranger")
	r.g.Review(t, pr.Number, stranger, giteatest.Approve, "lgtm")
	other := h.srv.CreateUser(t, "stranger")
	r.g.Review(t, pr.Number, other, giteatest.RequestChanges, "I do not like it")
	id := r.g.Review(t, pr.Number, r.reviewers[0], giteatest.Approve, "ok")
	st, err := h.f.State(ctx, r.Repo(), pr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Approvals != 1 || st.ChangesRequested {
		t.Fatalf("with a stranger's reviews: %+v, want only the collaborator's approval", st)
	}
	r.g.DismissReview(t, pr.Number, id)
	if st, err = h.f.State(ctx, r.Repo(), pr); err != nil || st.Approvals != 0 {
		t.Fatalf("after the dismissal: %+v %v, want no approval", st, err)
	}
}

// TestConflict: Gitea's mergeable false is believed once its check is done:
// a definite conflict fails the stage instead of waiting for ever.
func TestConflict(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	clk := &shiftClock{}
	f := New(Options{Secrets: h.f.secrets, Clock: clk, MergeableTries: 20, MergeableWait: 100 * time.Millisecond})
	r := h.NewRepo(t).(*repo)
	ctx := context.Background()
	r.g.Commit(t, "ballet/ACME-1", "same.txt", "the branch's words")
	r.g.Commit(t, "main", "same.txt", "main's words")
	pr, err := f.EnsurePullRequest(ctx, r.Repo(), "ballet/ACME-1", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	// Gitea says unmergeable; it may still be checking: unknown, and the
	// stage waits.
	st, err := f.State(ctx, r.Repo(), pr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mergeable != nil {
		t.Fatalf("first seen unmergeable: mergeable %v, want unknown until ConflictAfter", *st.Mergeable)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionWait {
		t.Fatalf("Decide on a first unmergeable answer: %+v, want wait", d)
	}
	clk.shift.Store(int64(DefaultConflictAfter))
	if st, err = f.State(ctx, r.Repo(), pr); err != nil {
		t.Fatal(err)
	}
	if st.Mergeable == nil || *st.Mergeable {
		t.Fatalf("unmergeable for ConflictAfter: mergeable %v, want false", st.Mergeable)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionFailed || !strings.Contains(d.Reason, "conflicts") {
		t.Fatalf("Decide: %+v", d)
	}
	if err := f.Merge(ctx, r.Repo(), pr); !errors.Is(err, forge.ErrNotMergeable) {
		t.Fatalf("Merge of a conflict: %v, want ErrNotMergeable", err)
	}
}

// shiftClock is the real clock, its Now moved on by shift.
type shiftClock struct {
	clock.Real
	shift atomic.Int64
}

func (c *shiftClock) Now() time.Time { return c.Real.Now().Add(time.Duration(c.shift.Load())) }

// TestHeadInBaseIsMerged: an open pull request whose head is in the base
// already (a merge whose answer was lost — Gitea answered 500 after the
// merge commit landed —, or a person pushing the head into the base) is
// merged: State says so and nothing merges it again; where the repository
// allows it, the pull request is marked merged on Gitea too.
func TestHeadInBaseIsMerged(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.NewRepo(t).(*repo)
	r.g.AllowManualMerge(t)
	ctx := context.Background()
	head := r.Push(t, "ballet/ACME-1")
	pr, err := h.f.EnsurePullRequest(ctx, r.Repo(), "ballet/ACME-1", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	r.g.PushTo(t, head, "main")
	st, err := h.f.State(ctx, r.Repo(), pr)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Merged || st.Open || st.HeadSHA != head {
		t.Fatalf("state %+v: want merged at %s", st, head)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionDone {
		t.Fatalf("Decide: %+v, want done", d)
	}
	if p := r.g.Pull(t, pr.Number); !p.HasMerged {
		t.Errorf("the pull request stayed open on Gitea (state %s): Ballet should have marked it merged", p.State)
	}
}

// TestCreateRace: a pull request opened between Ensure's look-up and its
// create (a person, or a Ensure of Core before a crash) makes Gitea answer
// 409, and Ensure adopts that one. (Truly concurrent creates are not
// refused reliably by Gitea 1.26 — four at once opened two — so the flow
// runs one Ensure per ticket at a time.)
func TestCreateRace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.NewRepo(t).(*repo)
	r.Push(t, "ballet/ACME-1")
	var byHand int
	f := New(Options{Secrets: h.f.secrets, HTTPClient: &http.Client{Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/pulls") && byHand == 0 {
			byHand = r.g.CreatePR(t, "ballet/ACME-1", "by hand", "")
		}
		return http.DefaultTransport.RoundTrip(req)
	})}})
	pr, err := f.EnsurePullRequest(context.Background(), r.Repo(), "ballet/ACME-1", "t", "b")
	if err != nil || byHand == 0 || pr.Number != byHand {
		t.Fatalf("Ensure racing a person: %+v %v, want the one opened by hand (#%d)", pr, err, byHand)
	}
	if got := r.PullRequests(t, "ballet/ACME-1"); len(got) != 1 {
		t.Fatalf("%d pull requests, want 1", len(got))
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestWritesNeedCredentials: a repository without a credentials reference
// is read anonymously; a write fails saying why.
func TestWritesNeedCredentials(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.NewRepo(t).(*repo)
	r.Push(t, "ballet/ACME-1")
	anon := r.Repo()
	anon.CredentialsRef = ""
	_, err := h.f.EnsurePullRequest(context.Background(), anon, "ballet/ACME-1", "t", "b")
	if err == nil || !strings.Contains(err.Error(), "no credentials_ref") {
		t.Fatalf("anonymous Ensure: %v, want a refusal naming credentials_ref", err)
	}
	pr, err := h.f.EnsurePullRequest(context.Background(), r.Repo(), "ballet/ACME-1", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.f.State(context.Background(), anon, pr); err != nil || !st.Open {
		t.Fatalf("anonymous State: %+v %v", st, err)
	}
}

func TestTarget(t *testing.T) {
	for _, c := range []struct{ url, api, base, owner, name, err string }{
		{url: "https://git.example.com/acme/app.git", base: "https://git.example.com", owner: "acme", name: "app"},
		{url: "http://127.0.0.1:3000/acme/app", base: "http://127.0.0.1:3000", owner: "acme", name: "app"},
		{url: "https://example.com/gitea/acme/app.git", base: "https://example.com/gitea", owner: "acme", name: "app"},
		{url: "https://example.com/acme/app.git", api: "https://api.example.com/x/api/v1/", base: "https://api.example.com/x", owner: "acme", name: "app"},
		{url: "https://example.com/acme/app.git", api: "https://api.example.com/x", err: "must end with /api/v1"},
		{url: "https://example.com/app.git", err: "owner/repo"},
		{url: "https://tok:x@example.com/acme/app.git", err: "credentials"},
		{url: "ssh://example.com/acme/app.git", err: "http(s) URL"},
	} {
		base, owner, name, err := Target(forge.Repo{URL: c.url, APIURL: c.api})
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %s: %v, want an error with %q", c.url, c.api, err, c.err)
		case c.err == "" && (err != nil || base != c.base || owner != c.owner || name != c.name):
			t.Errorf("%s %s: %q %q %q %v, want %q %q %q", c.url, c.api, base, owner, name, err, c.base, c.owner, c.name)
		}
	}
}

// TestAnswers: a rate limit becomes *forge.RateLimitedError until the time
// Gitea names, a 5xx a plain error naming the call and repository; the
// token is in no error.
func TestAnswers(t *testing.T) {
	t.Parallel()
	const token = "s3cr3t-t0ken-value"
	var mu sync.Mutex
	var status int
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "token "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"message":"echo ` + req.Header.Get("Authorization") + `"}`))
	}))
	defer srv.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := New(Options{Secrets: envs(func(string) (string, bool) { return token, true }), Clock: clock.NewFake(now)})
	repo := forge.Repo{URL: srv.URL + "/acme/app.git", DefaultBranch: "main", CredentialsRef: "env:TOKEN"}
	pr := forge.PullRequest{Number: 7, Branch: "b", Base: "main", HeadSHA: strings.Repeat("a", 40)}
	set := func(s int, h http.Header) { mu.Lock(); status, header = s, h; mu.Unlock() }

	set(http.StatusTooManyRequests, http.Header{"Retry-After": {"90"}})
	for name, err := range map[string]error{
		"State": func() error { _, err := f.State(context.Background(), repo, pr); return err }(),
		"Merge": f.Merge(context.Background(), repo, pr),
		"Ensure": func() error {
			_, err := f.EnsurePullRequest(context.Background(), repo, "b", "t", "")
			return err
		}(),
	} {
		var rl *forge.RateLimitedError
		if !errors.As(err, &rl) || !rl.Until.Equal(now.Add(90*time.Second)) {
			t.Errorf("%s on 429: %v, want rate limited until %s", name, err, now.Add(90*time.Second))
		}
	}
	set(http.StatusBadGateway, nil)
	for name, err := range map[string]error{
		"State": func() error { _, err := f.State(context.Background(), repo, pr); return err }(),
		"Merge": f.Merge(context.Background(), repo, pr),
	} {
		var rl *forge.RateLimitedError
		if err == nil || errors.As(err, &rl) || errors.Is(err, forge.ErrNotMergeable) || !strings.Contains(err.Error(), "acme/app") ||
			!strings.Contains(err.Error(), "502") {
			t.Errorf("%s on 502: %v, want a plain error naming acme/app and 502", name, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the token is in the error: %v", name, err)
		}
	}
}
