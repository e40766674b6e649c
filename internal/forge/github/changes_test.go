package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v84/github"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/githubfake"
)

// TestComparisonFromGitHub: GitHub's compare in forge words — commits
// newest first within the limit, removed is deleted, a previous name only
// for a rename, a patch GitHub left out (lines changed, no patch) cut, a
// list of 300 files (GitHub's most) cut.
func TestComparisonFromGitHub(t *testing.T) {
	t.Parallel()
	var commits []*gh.RepositoryCommit
	for i := range 3 {
		commits = append(commits, &gh.RepositoryCommit{SHA: gh.Ptr(fmt.Sprint("c", i)), Commit: &gh.Commit{Message: gh.Ptr(fmt.Sprint("m", i, "\n")),
			Author: &gh.CommitAuthor{Name: gh.Ptr("Ann"), Email: gh.Ptr("ann@example.com")}}})
	}
	cmp := &gh.CommitsComparison{AheadBy: gh.Ptr(400), Commits: commits, Files: []*gh.CommitFile{
		{Filename: gh.Ptr("gone.go"), Status: gh.Ptr("removed"), Deletions: gh.Ptr(2), Patch: gh.Ptr("@@ -1,2 +0,0 @@\n-a\n-b")},
		{Filename: gh.Ptr("new.go"), PreviousFilename: gh.Ptr("old.go"), Status: gh.Ptr("renamed")},
		{Filename: gh.Ptr("big.go"), Status: gh.Ptr("modified"), Additions: gh.Ptr(90000)},
	}}
	got := comparison(cmp, forge.CompareLimits{Commits: 2, Files: 300})
	if got.TotalCommits != 400 || len(got.Commits) != 2 || got.Commits[0].SHA != "c2" || got.Commits[0].Message != "m2" ||
		got.Commits[0].Author != "Ann <ann@example.com>" || got.FilesCut {
		t.Fatalf("commits: %+v", got)
	}
	want := []forge.FileChange{
		{Path: "gone.go", Status: forge.FileDeleted, Deletions: 2, Patch: "@@ -1,2 +0,0 @@\n-a\n-b\n"},
		{Path: "new.go", PreviousPath: "old.go", Status: forge.FileRenamed},
		{Path: "big.go", Status: forge.FileModified, Additions: 90000, PatchCut: true},
	}
	for i, w := range want {
		if got.Files[i] != w {
			t.Errorf("file %d: %+v, want %+v", i, got.Files[i], w)
		}
	}
	cmp.Files = make([]*gh.CommitFile, 300)
	for i := range cmp.Files {
		cmp.Files[i] = &gh.CommitFile{Filename: gh.Ptr(fmt.Sprint(i)), Status: gh.Ptr("added")}
	}
	if got := comparison(cmp, forge.CompareLimits{}); !got.FilesCut || len(got.Files) != 300 {
		t.Errorf("300 files: cut %v, %d files", got.FilesCut, len(got.Files))
	}
}

// TestChangesOfAFailingGitHub: a GitHub that fails is an error naming
// what was read, never the token; a rate limit is a
// *forge.RateLimitedError.
func TestChangesOfAFailingGitHub(t *testing.T) {
	t.Parallel()
	h := newContractHarness(t, false)
	r := h.NewRepo(t).(*contractRepo)
	sha := r.Push(t, "ballet/ACME-1")
	h.fake.Fail(http.StatusBadGateway, 1)
	_, err := h.f.Heads(context.Background(), r.Repo(), "ballet/ACME-1")
	if err == nil || !strings.Contains(err.Error(), "github: reading the branch ballet/ACME-1") || strings.Contains(err.Error(), token) {
		t.Fatalf("Heads on a failing GitHub: %v", err)
	}
	hd, err := h.f.Heads(context.Background(), r.Repo(), "ballet/ACME-1")
	if err != nil || hd.HeadSHA != sha {
		t.Fatalf("Heads: %+v, %v", hd, err)
	}
	h.fake.RateLimit(githubfake.Limit429, time.Now().Add(time.Minute), 1)
	_, err = h.f.Compare(context.Background(), r.Repo(), "ballet/ACME-1", hd, forge.CompareLimits{})
	var rl *forge.RateLimitedError
	if !errors.As(err, &rl) || !strings.Contains(err.Error(), "comparing ballet/ACME-1 with main") {
		t.Fatalf("Compare rate limited: %v", err)
	}
	if v, err := h.f.PullRequest(context.Background(), r.Repo(), "ballet/ACME-1", sha); v != nil || err != nil {
		t.Fatalf("PullRequest without one: %+v, %v", v, err)
	}
}
