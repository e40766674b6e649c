package gitforge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/forgetest"
)

// TestContract runs the forge contract on plain git (a human merges) and
// on the test build's Merging forge (Ballet merges).
func TestContract(t *testing.T) {
	t.Run("Forge", func(t *testing.T) {
		forgetest.Run(t, harness{f: New(t.TempDir()), caps: forgetest.Caps{}})
	})
	t.Run("Merging", func(t *testing.T) {
		// Merging merges a merged branch again on purpose (its doc): no MergeOnce.
		forgetest.Run(t, harness{f: NewMerging(t.TempDir()), caps: forgetest.Caps{Merge: true}})
	})
}

// TestPolicy runs the merge-policy table on plain git: the rows without
// pull requests, checks or reviews, where a person merges.
func TestPolicy(t *testing.T) {
	forgetest.Policy(t, harness{f: New(t.TempDir()), caps: forgetest.Caps{}})
}

type harness struct {
	f    forge.Forge
	caps forgetest.Caps
}

func (h harness) Forge() forge.Forge   { return h.f }
func (h harness) Caps() forgetest.Caps { return h.caps }
func (h harness) NewRepo(t testing.TB) forgetest.Repo {
	return &contractRepo{w: setup(t.(*testing.T))}
}

// contractRepo is a world as the contract drives it; plain git has no pull
// requests, checks or reviews (those methods are never called).
type contractRepo struct{ w *world }

func (r *contractRepo) Repo() forge.Repo { return forge.Repo{URL: r.w.bare, DefaultBranch: "main"} }

func (r *contractRepo) CommitFiles(t testing.TB, branch string, commits ...forgetest.FileCommit) []string {
	w := r.w
	from := "main"
	if w.run(w.dir, "--git-dir="+w.bare, "branch", "--list", branch) != "" {
		w.git("fetch", "--quiet", "origin", branch)
		from = "FETCH_HEAD"
	}
	w.git("checkout", "--quiet", "-B", branch, from)
	var shas []string
	for _, c := range commits {
		if err := os.WriteFile(filepath.Join(w.work, c.Path), []byte(c.Content), 0o644); err != nil {
			t.Fatal(err)
		}
		w.git("add", "--", c.Path)
		w.git("commit", "--quiet", "--cleanup=verbatim", "-m", c.Message)
		shas = append(shas, w.git("rev-parse", "HEAD"))
	}
	w.git("push", "--quiet", "origin", branch)
	w.git("checkout", "--quiet", "main")
	return shas
}

func (r *contractRepo) Push(t testing.TB, branch string) string {
	w := r.w
	from := "main"
	if w.run(w.dir, "--git-dir="+w.bare, "branch", "--list", branch) != "" {
		w.git("fetch", "--quiet", "origin", branch)
		from = "FETCH_HEAD"
	}
	w.git("checkout", "--quiet", "-B", branch, from)
	sha := w.commit(strings.ReplaceAll(branch, "/", "_")+".txt", branch)
	w.git("push", "--quiet", "origin", branch)
	w.git("checkout", "--quiet", "main")
	return sha
}

func (r *contractRepo) PullRequests(t testing.TB, branch string) []forgetest.Opened { return nil }

func (r *contractRepo) MergesOf(t testing.TB, sha string) int {
	n := 0
	for _, line := range strings.Split(r.w.run(r.w.dir, "--git-dir="+r.w.bare, "log", "--merges", "--format=%P", "main", "--"), "\n") {
		if p := strings.Fields(line); len(p) > 1 && strings.Contains(strings.Join(p[1:], " "), sha) {
			n++
		}
	}
	return n
}

// MergeByHand merges the branch into main with a merge commit, as a person
// would.
func (r *contractRepo) MergeByHand(t testing.TB, pr forge.PullRequest) {
	w := r.w
	w.git("checkout", "--quiet", "main")
	w.git("pull", "--quiet", "--ff-only", "origin", "main")
	w.git("fetch", "--quiet", "origin", pr.Branch)
	w.git("merge", "--quiet", "--no-ff", "-m", "Merge "+pr.Branch, "FETCH_HEAD")
	w.git("push", "--quiet", "origin", "main")
}

func (r *contractRepo) OpenByHand(testing.TB, string, string, string) int {
	panic("plain git has no pull requests")
}
func (r *contractRepo) CloseByHand(testing.TB, forge.PullRequest) {
	panic("plain git has no pull requests")
}
func (r *contractRepo) SetStatus(testing.TB, string, string, string) {
	panic("plain git has no checks")
}
func (r *contractRepo) Review(testing.TB, forge.PullRequest, int, bool, string) string {
	panic("plain git has no reviews")
}
func (r *contractRepo) DismissReview(testing.TB, forge.PullRequest, int) {
	panic("plain git has no reviews")
}
func (r *contractRepo) Protect(testing.TB, forgetest.Protection) {
	panic("plain git has no branch protection")
}

// DeleteBranch deletes branch in the bare repository, as a person would
// after merging it (or giving up on it).
func (r *contractRepo) DeleteBranch(t testing.TB, branch string) {
	r.w.run(r.w.dir, "--git-dir="+r.w.bare, "branch", "-D", branch)
}
