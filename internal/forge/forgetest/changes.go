package forgetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge"
)

// Source is a forge as a ticket's changes read it (changes.Source).
type Source interface {
	Heads(ctx context.Context, repo forge.Repo, branch string) (forge.Heads, error)
	Compare(ctx context.Context, repo forge.Repo, branch string, h forge.Heads, lim forge.CompareLimits) (forge.Comparison, error)
	PullRequest(ctx context.Context, repo forge.Repo, branch, head string) (*forge.PullView, error)
}

// Committer is a Repo that commits files: what the case Changes needs.
type Committer interface {
	// CommitFiles makes one commit of each of commits, in order, on branch
	// (from main when new), pushes them at once, and returns their ids.
	CommitFiles(t testing.TB, branch string, commits ...FileCommit) []string
}

// FileCommit is a commit that writes one file.
type FileCommit struct {
	Path    string
	Content string // lines, each ended by "\n"
	Message string // as written
}

// StatusURL is the page a harness gives the check context it reports
// (Repo.SetStatus), where the forge keeps one: Changes expects it back.
func StatusURL(context string) string { return "http://127.0.0.1:9/ci/" + context }

// changes is the contract's case Changes, what a ticket's changes read
// (Source), in sequence in one repository (a real forge is slow): the
// heads of a branch not pushed, then of one with two commits; what Compare
// reads of them, whole and within limits; and where the forge has pull
// requests, the pull request with a check and an approval, which goes
// stale when the branch moves on.
func changes(t *testing.T, f forge.Forge, c Caps, r Repo) {
	src, ok := f.(Source)
	if !ok {
		t.Fatalf("%T reads no changes", f)
	}
	cm, ok := r.(Committer)
	if !ok {
		t.Fatalf("%T commits no files", r)
	}
	ctx := context.Background()
	repo := r.Repo()
	const branch = "ballet/ACME-7"
	heads := func() forge.Heads {
		t.Helper()
		hd, err := src.Heads(ctx, repo, branch)
		if err != nil {
			t.Fatalf("Heads: %v", err)
		}
		return hd
	}
	pull := func(head string) *forge.PullView {
		t.Helper()
		v, err := src.PullRequest(ctx, repo, branch, head)
		if err != nil {
			t.Fatalf("PullRequest: %v", err)
		}
		return v
	}

	hd := heads()
	if hd.Branch != branch || hd.Base != "main" || hd.HeadSHA != "" || hd.BaseSHA == "" {
		t.Fatalf("heads of a branch never pushed: %+v", hd)
	}
	if v := pull(""); v != nil {
		t.Fatalf("pull request of a branch never pushed: %+v", v)
	}

	msg1 := "ACME-7 implement: add a\n\nWhy: a needs two lines.\n\nBallet-Ticket: ACME-7\nBallet-Stage: implement\nBallet-Run: run-1"
	shas := cm.CommitFiles(t, branch, FileCommit{Path: "a.txt", Content: "one\ntwo\n", Message: msg1},
		FileCommit{Path: "b.txt", Content: "three\n", Message: "ACME-7 second"})
	sha1, sha2 := shas[0], shas[1]
	hd = heads()
	if hd.HeadSHA != sha2 || hd.BaseSHA == "" {
		t.Fatalf("heads after two commits: %+v, want the head %s", hd, sha2)
	}
	all := forge.CompareLimits{Commits: 250, Files: 300, PatchBytes: 1 << 20}
	cmp, err := src.Compare(ctx, repo, branch, hd, all)
	if err != nil {
		t.Fatalf("Compare: %v", err)
	}
	if cmp.TotalCommits != 2 || len(cmp.Commits) != 2 || cmp.Commits[0].SHA != sha2 || cmp.Commits[1].SHA != sha1 {
		t.Fatalf("commits %+v (total %d), want %s then %s", cmp.Commits, cmp.TotalCommits, sha2, sha1)
	}
	first := cmp.Commits[1]
	if first.Message != msg1 || first.Author == "" || time.Since(first.Time) > 24*time.Hour || time.Until(first.Time) > time.Hour {
		t.Fatalf("first commit %+v: want the message as written, an author and the time", first)
	}
	want := []forge.FileChange{
		{Path: "a.txt", Status: forge.FileAdded, Additions: 2, Patch: "@@ -0,0 +1,2 @@\n+one\n+two\n"},
		{Path: "b.txt", Status: forge.FileAdded, Additions: 1, Patch: "@@ -0,0 +1 @@\n+three\n"},
	}
	if len(cmp.Files) != len(want) || cmp.FilesCut {
		t.Fatalf("files %+v (cut %v), want %+v", cmp.Files, cmp.FilesCut, want)
	}
	for i, w := range want {
		got := cmp.Files[i]
		// A forge may write a one-line range "1" as "1,1".
		got.Patch = strings.Replace(got.Patch, "+1,1 @@", "+1 @@", 1)
		if got != w {
			t.Fatalf("file %d: %+v, want %+v", i, got, w)
		}
	}
	cut, err := src.Compare(ctx, repo, branch, hd, forge.CompareLimits{Commits: 1, Files: 1, PatchBytes: 1 << 20})
	if err != nil {
		t.Fatalf("Compare within limits: %v", err)
	}
	if cut.TotalCommits != 2 || len(cut.Commits) != 1 || cut.Commits[0].SHA != sha2 || len(cut.Files) != 1 || !cut.FilesCut {
		t.Fatalf("within 1 commit and 1 file: %d of %d commits, %d files (cut %v)", len(cut.Commits), cut.TotalCommits, len(cut.Files), cut.FilesCut)
	}

	if !c.PullRequests {
		if v := pull(sha2); v != nil {
			t.Fatalf("a forge without pull requests has one: %+v", v)
		}
		return
	}
	if v := pull(sha2); v != nil {
		t.Fatalf("pull request before one was opened: %+v", v)
	}
	pr, err := f.EnsurePullRequest(ctx, repo, branch, "ACME-7", "the ticket")
	if err != nil {
		t.Fatalf("EnsurePullRequest: %v", err)
	}
	r.SetStatus(t, sha2, "ci", StateSuccess)
	reviewer := r.Review(t, pr, 0, true, "looks good")
	v := pull(sha2)
	if v == nil || v.Number != pr.Number || v.URL != pr.URL || v.State != forge.PullOpen || v.HeadSHA != sha2 {
		t.Fatalf("pull request %+v, want #%d open at %s", v, pr.Number, sha2)
	}
	if len(v.Checks) != 1 || v.Checks[0] != (forge.CheckView{Name: "ci", State: forge.CheckSuccess, URL: StatusURL("ci")}) {
		t.Fatalf("checks %+v, want ci passed with its page", v.Checks)
	}
	if len(v.Reviews) != 1 || v.Reviews[0].Reviewer != reviewer || v.Reviews[0].State != forge.ReviewApproved || v.Reviews[0].Stale {
		t.Fatalf("reviews %+v, want %s's approval, not stale", v.Reviews, reviewer)
	}

	sha3 := cm.CommitFiles(t, branch, FileCommit{Path: "c.txt", Content: "four\n", Message: "ACME-7 third"})[0]
	v = pull(sha3)
	if v == nil || v.Number != pr.Number || v.HeadSHA != sha3 || len(v.Checks) != 0 {
		t.Fatalf("after a push: %+v, want #%d at %s without checks", v, pr.Number, sha3)
	}
	if len(v.Reviews) != 1 || v.Reviews[0].State != forge.ReviewApproved || !v.Reviews[0].Stale {
		t.Fatalf("reviews after a push: %+v, want the approval, stale", v.Reviews)
	}
}
