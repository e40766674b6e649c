package gitea

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/forge"
)

// TestCompareSendsTheTokenToGitAndNeverShowsIt: Compare fetches with the
// repository's token as git's Authorization header, and the error of a
// refused fetch names the call without the token, whatever the server
// echoes.
func TestCompareSendsTheTokenToGitAndNeverShowsIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "denied for "+r.Header.Get("Authorization"), http.StatusForbidden)
	}))
	defer srv.Close()
	f := New(Options{Secrets: envs(func(k string) (string, bool) { return fakeToken, k == "GITEA_TOKEN" }), GitCache: t.TempDir()})
	repo := forge.Repo{URL: srv.URL + "/acme/app.git", DefaultBranch: "main", CredentialsRef: "env:GITEA_TOKEN"}
	h := forge.Heads{Branch: "ballet/ACME-1", Base: "main", HeadSHA: headSHA, BaseSHA: baseSHA}
	_, err := f.Compare(context.Background(), repo, "ballet/ACME-1", h, forge.CompareLimits{Commits: 10, Files: 10, PatchBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "gitea: compare ballet/ACME-1 with main in acme/app: git: ") ||
		!strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), fakeToken) || strings.Contains(err.Error(), "--git-dir") {
		t.Fatalf("a refused fetch: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 || auth[0] != "token "+fakeToken {
		t.Fatalf("git sent Authorization %q, want the token", auth)
	}
	if _, err := New(Options{}).Compare(context.Background(), repo, "ballet/ACME-1", h, forge.CompareLimits{}); err == nil ||
		!strings.Contains(err.Error(), "GitCache") {
		t.Fatalf("Compare without a git cache: %v", err)
	}
}

// TestPullRequestViewOfAForgeError: a Gitea that fails while the pull
// request is read is an error quoting Gitea, never a half view.
func TestPullRequestViewOfAForgeError(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.on("GET /repos/acme/app/pulls/main/feature", http.StatusOK, pullJSON(7, sdk.StateOpen, true, false))
	g.on("GET /repos/acme/app/pulls/7", http.StatusInternalServerError, map[string]string{"message": "database is locked"})
	v, err := g.forge(nil).PullRequest(context.Background(), g.repo(), "feature", headSHA)
	if v != nil || err == nil || !strings.Contains(err.Error(), "HTTP 500: database is locked") || strings.Contains(err.Error(), fakeToken) {
		t.Fatalf("PullRequest: %+v, %v", v, err)
	}
	var rl *forge.RateLimitedError
	if errors.As(err, &rl) {
		t.Fatalf("a 500 is no rate limit: %v", err)
	}
}

// TestReviewViews: the latest review of each reviewer, stale when Gitea
// says so, when dismissed, or on another commit than the head.
func TestReviewViews(t *testing.T) {
	t.Parallel()
	u := func(name string) *sdk.User { return &sdk.User{UserName: name} }
	got := reviewViews([]*sdk.PullReview{
		{ID: 1, Reviewer: u("ann"), State: sdk.ReviewStateApproved, CommitID: headSHA},
		{ID: 2, Reviewer: u("bob"), State: sdk.ReviewStateApproved, CommitID: baseSHA},
		{ID: 3, Reviewer: u("cid"), State: sdk.ReviewStateRequestChanges, CommitID: headSHA, Dismissed: true},
		{ID: 4, Reviewer: u("dee"), State: sdk.ReviewStateApproved, CommitID: headSHA, Stale: true},
		{ID: 5, Reviewer: u("eve"), State: sdk.ReviewStateRequestReview},
		{ID: 6, Reviewer: u("ann"), State: sdk.ReviewStateComment, CommitID: headSHA},
		{ID: 7, State: sdk.ReviewStateApproved}, // neither a user nor a team
	}, headSHA)
	want := []forge.ReviewView{
		{Reviewer: "ann", State: forge.ReviewApproved},
		{Reviewer: "bob", State: forge.ReviewApproved, Stale: true},
		{Reviewer: "cid", State: forge.ReviewDismissed, Stale: true},
		{Reviewer: "dee", State: forge.ReviewApproved, Stale: true},
		{Reviewer: "eve", State: forge.ReviewPending},
	}
	if len(got) != len(want) {
		t.Fatalf("reviews %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("review %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestCheckViews: each status in the merge policy's words.
func TestCheckViews(t *testing.T) {
	t.Parallel()
	got := checkViews([]*sdk.Status{
		{Context: "a", State: sdk.StatusSuccess, TargetURL: "http://127.0.0.1:9/a"},
		{Context: "b", State: sdk.StatusWarning}, {Context: "c", State: statusSkipped},
		{Context: "d", State: sdk.StatusPending}, {Context: "e", State: sdk.StatusError},
		{Context: "f", State: sdk.StatusFailure}, {Context: "g", State: "someday"},
	})
	want := []string{forge.CheckSuccess, forge.CheckSuccess, forge.CheckNeutral, forge.CheckPending, forge.CheckFailure, forge.CheckFailure, forge.CheckFailure}
	for i, w := range want {
		if got[i].State != w {
			t.Errorf("%s: %s, want %s", got[i].Name, got[i].State, w)
		}
	}
	if got[0].URL != "http://127.0.0.1:9/a" {
		t.Errorf("the link: %q", got[0].URL)
	}
}

// TestCompareFollowsNoRedirect: a Gitea that redirects git elsewhere gets
// a refusal: git never goes to the other host (the header is scoped to
// Gitea's host, and redirects are off too).
func TestCompareFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer srv.Close()
	f := New(Options{Secrets: envs(func(k string) (string, bool) { return fakeToken, k == "GITEA_TOKEN" }), GitCache: t.TempDir()})
	repo := forge.Repo{URL: srv.URL + "/acme/app.git", DefaultBranch: "main", CredentialsRef: "env:GITEA_TOKEN"}
	h := forge.Heads{Branch: "ballet/ACME-1", Base: "main", HeadSHA: headSHA, BaseSHA: baseSHA}
	if _, err := f.Compare(context.Background(), repo, "ballet/ACME-1", h, forge.CompareLimits{}); err == nil {
		t.Fatal("Compare through a redirect: no error")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) > 0 {
		t.Fatalf("the redirect was followed: %d requests to another host (Authorization %q)", len(elsewhere), elsewhere)
	}
}
