package gitforge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
)

// mergeRecords reads the merge commits Merging wrote on main, oldest
// first, as "branch@head".
func (w *world) mergeRecords() []string {
	w.t.Helper()
	out := w.run(w.dir, "--git-dir="+w.bare, "log", "--reverse", "--first-parent", "--merges", "--format=%P %s", "main")
	var recs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 7 && f[2] == "ballet:" && f[3] == "merge" && f[5] == "at" && f[6] == f[1] {
			recs = append(recs, f[4]+"@"+f[1])
		}
	}
	return recs
}

func (w *world) head(ref string) string {
	w.t.Helper()
	return w.run(w.dir, "--git-dir="+w.bare, "rev-parse", ref)
}

// TestMergingMergesTheDecidedHead walks Ballet's merge on the test forge:
// an open branch is mergeable, Decide says merge, Merge merges exactly the
// head decided on with one merge commit, and State then says merged by that
// head — also once the branch moved on.
func TestMergingMergesTheDecidedHead(t *testing.T) {
	t.Parallel()
	w := setup(t)
	f := NewMerging("")
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	ctx := context.Background()
	if !f.CanMerge() {
		t.Fatal("the test forge cannot merge")
	}

	c1 := w.pushBranch("ACME-1")
	w.commit("main.txt", "main moved") // main diverges: a real merge is needed
	w.git("push", "--quiet", "origin", "main")
	pr, err := f.EnsurePullRequest(ctx, repo, "ACME-1", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.State(ctx, repo, pr)
	if err != nil {
		t.Fatal(err)
	}
	if flags(st) != "pushed,open" || st.HeadSHA != c1 || st.Mergeable == nil || !*st.Mergeable {
		t.Fatalf("open: %+v", st)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, f.CanMerge(), st); d.Action != forge.ActionMerge {
		t.Fatalf("Decide: %+v, want merge", d)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyManual}, f.CanMerge(), st); d.Action != forge.ActionWait || d.Waiting != forge.WaitMerge {
		t.Fatalf("Decide under the manual policy: %+v, want a human merge", d)
	}
	mainBefore := w.head("main")
	if err := f.Merge(ctx, repo, pr); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if got := w.mergeRecords(); len(got) != 1 || got[0] != "ACME-1@"+c1 {
		t.Fatalf("merge commits %v, want one of ACME-1 at %s", got, c1)
	}
	if parents := w.run(w.dir, "--git-dir="+w.bare, "log", "-1", "--format=%P", "main"); parents != mainBefore+" "+c1 {
		t.Fatalf("the merge commit's parents are %s, want %s %s", parents, mainBefore, c1)
	}
	if files := w.run(w.dir, "--git-dir="+w.bare, "ls-tree", "--name-only", "main"); !strings.Contains(files, "ACME-1.txt") || !strings.Contains(files, "main.txt") {
		t.Fatalf("main after the merge holds %q", files)
	}
	if st, err = f.State(ctx, repo, pr); err != nil || flags(st) != "pushed,merged" || st.HeadSHA != c1 {
		t.Fatalf("after the merge: %+v %v", st, err)
	}
	if merges, err := f.Merges(ctx, repo, "ACME-1"); err != nil || len(merges) != 1 || merges[0] != c1 {
		t.Fatalf("Merges: %v %v, want [%s]", merges, err, c1)
	}

	// The branch moves on after the merge: still merged, by the head merged.
	w.git("checkout", "--quiet", "ACME-1")
	w.commit("later.txt", "later")
	w.git("push", "--quiet", "origin", "ACME-1")
	w.git("checkout", "--quiet", "main")
	if st, err = f.State(ctx, repo, pr); err != nil || !st.Merged || st.Open || st.HeadSHA != c1 {
		t.Fatalf("merged, then pushed again: %+v %v, want merged by %s", st, err, c1)
	}
	// Plain git alone would call it open again: the record is what tells.
	if plain, _ := f.Forge.State(ctx, repo, pr); plain.Merged {
		t.Fatalf("plain git reads the moved branch as merged: %+v", plain)
	}
}

// TestMergingRefusesAMovedHead: the head decided on is the head merged;
// when the branch moved since, nothing is merged.
func TestMergingRefusesAMovedHead(t *testing.T) {
	t.Parallel()
	w := setup(t)
	f := NewMerging("")
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	ctx := context.Background()
	c1 := w.pushBranch("ACME-1")
	w.git("checkout", "--quiet", "ACME-1")
	c2 := w.commit("more.txt", "more")
	w.git("push", "--quiet", "origin", "ACME-1")
	w.git("checkout", "--quiet", "main")
	mainBefore := w.head("main")
	err := f.Merge(ctx, repo, forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1})
	if !errors.Is(err, forge.ErrOutOfDate) || !strings.Contains(err.Error(), c2) {
		t.Fatalf("Merge of the old head: %v, want ErrOutOfDate naming %s", err, c2)
	}
	if w.head("main") != mainBefore || len(w.mergeRecords()) != 0 {
		t.Fatal("a refused merge changed main")
	}
	// A deleted branch has no head to merge.
	w.git("push", "--quiet", "origin", "--delete", "ACME-1")
	if err := f.Merge(ctx, repo, forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c2}); !errors.Is(err, forge.ErrOutOfDate) {
		t.Fatalf("Merge of a deleted branch: %v, want ErrOutOfDate", err)
	}
	// Garbage never reaches git.
	for _, pr := range []forge.PullRequest{{Branch: "ACME-1", Base: "main", HeadSHA: "HEAD"}, {Branch: "-x", Base: "main", HeadSHA: c1}} {
		if err := f.Merge(ctx, repo, pr); err == nil {
			t.Fatalf("Merge(%+v) went through", pr)
		}
	}
	if err := f.Merge(ctx, forge.Repo{URL: "https://example.invalid/x.git", DefaultBranch: "main"},
		forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1}); !errors.Is(err, forge.ErrCannotMerge) {
		t.Fatalf("Merge on a URL: %v, want ErrCannotMerge", err)
	}
}

// TestMergingConflict: a branch that conflicts with main is not mergeable
// (State) and is not merged (Merge).
func TestMergingConflict(t *testing.T) {
	t.Parallel()
	w := setup(t)
	f := NewMerging("")
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	ctx := context.Background()
	w.git("checkout", "--quiet", "-b", "ACME-1", "main")
	c1 := w.commit("README", "theirs")
	w.git("push", "--quiet", "origin", "ACME-1")
	w.git("checkout", "--quiet", "main")
	w.commit("README", "ours")
	w.git("push", "--quiet", "origin", "main")
	pr := forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1}
	st, err := f.State(ctx, repo, pr)
	if err != nil || st.Mergeable == nil || *st.Mergeable {
		t.Fatalf("conflicting: %+v %v, want mergeable false", st, err)
	}
	if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionFailed {
		t.Fatalf("Decide: %+v, want failed", d)
	}
	if err := f.Merge(ctx, repo, pr); !errors.Is(err, forge.ErrNotMergeable) {
		t.Fatalf("Merge: %v, want ErrNotMergeable", err)
	}
	if len(w.mergeRecords()) != 0 {
		t.Fatal("a conflicting merge was recorded")
	}
}

// TestMergingCountsEveryMerge: a second merge of the same head is not
// refused but recorded, so that a test sees Ballet merge twice.
func TestMergingCountsEveryMerge(t *testing.T) {
	t.Parallel()
	w := setup(t)
	f := NewMerging("")
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	ctx := context.Background()
	c1 := w.pushBranch("ACME-1")
	pr := forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1}
	for range 2 {
		if err := f.Merge(ctx, repo, pr); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.mergeRecords(); len(got) != 2 {
		t.Fatalf("merge commits %v, want two", got)
	}
	if merges, _ := f.Merges(ctx, repo, "ACME-1"); len(merges) != 2 {
		t.Fatalf("Merges %v, want two", merges)
	}
	if merges, _ := f.Merges(ctx, repo, "ACME-10"); len(merges) != 0 {
		t.Fatalf("Merges of another branch: %v", merges)
	}
}

// TestMergingConcurrently: merges of many branches at once all land (the
// base's compare-and-swap retries), each exactly once.
func TestMergingConcurrently(t *testing.T) {
	t.Parallel()
	w := setup(t)
	f := NewMerging("")
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	heads := map[string]string{}
	for i := range 8 {
		b := fmt.Sprintf("ACME-%d", i+1)
		heads[b] = w.pushBranch(b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(heads))
	for b, sha := range heads {
		wg.Go(func() {
			errs <- f.Merge(context.Background(), repo, forge.PullRequest{Branch: b, Base: "main", HeadSHA: sha})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for _, r := range w.mergeRecords() {
		got[r]++
	}
	for b, sha := range heads {
		if got[b+"@"+sha] != 1 {
			t.Errorf("%s merged %d times, want once (all: %v)", b, got[b+"@"+sha], got)
		}
	}
}

// TestMergingFaultPointAfterTheMerge: the fault point forge.merged kills
// the process after the merge commit landed, so a killed Core leaves the
// merge done and durable, and only its record in the flow is missing.
func TestMergingFaultPointAfterTheMerge(t *testing.T) {
	if bare := os.Getenv("MERGING_CHILD_BARE"); bare != "" {
		err := NewMerging("").Merge(context.Background(), forge.Repo{URL: bare, DefaultBranch: "main"},
			forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: os.Getenv("MERGING_CHILD_HEAD")})
		fmt.Printf("merge returned: %v\n", err)
		os.Exit(0)
	}
	t.Parallel()
	w := setup(t)
	c1 := w.pushBranch("ACME-1")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMergingFaultPointAfterTheMerge$")
	cmd.Env = append(os.Environ(), "MERGING_CHILD_BARE="+w.bare, "MERGING_CHILD_HEAD="+c1, fault.EnvVar+"="+FaultMerged)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" || len(out) != 0 {
		t.Fatalf("the child was not killed at %s: %v, output %q", FaultMerged, err, out)
	}
	if got := w.mergeRecords(); len(got) != 1 || got[0] != "ACME-1@"+c1 {
		t.Fatalf("after the kill: merge commits %v, want the one merge", got)
	}
}

// TestForBuild: a build without the ballet_testforge tag — every
// production build — has the plain-git forge on which only a human merges.
func TestForBuild(t *testing.T) {
	t.Parallel()
	_, merging := ForBuild("").(*Merging)
	if merging != TestBuild || ForBuild("").CanMerge() != TestBuild {
		t.Fatalf("ForBuild is %T in a build with TestBuild %v", ForBuild(""), TestBuild)
	}
}

// TestMergingRecoversAStaleRefLock: a Core killed while it updated main left
// main's lock file in the repository; the next merge removes it once it is
// stale and merges, while a fresh lock (someone is updating main right now)
// is left alone and the merge fails instead of breaking it.
func TestMergingRecoversAStaleRefLock(t *testing.T) {
	t.Parallel()
	w := setup(t)
	f := NewMerging("")
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	ctx := context.Background()
	c1 := w.pushBranch("ACME-1")
	lock := filepath.Join(w.bare, "refs", "heads", "main.lock")

	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Merge(ctx, repo, forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1}); err == nil {
		t.Fatal("Merge went through a fresh lock of main")
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("a fresh lock was removed: %v", err)
	}

	old := time.Now().Add(-2 * StaleRefLock)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	if err := f.Merge(ctx, repo, forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1}); err != nil {
		t.Fatalf("Merge with a stale lock of main: %v", err)
	}
	if got := w.mergeRecords(); len(got) != 1 || got[0] != "ACME-1@"+c1 {
		t.Fatalf("merge records %v, want ACME-1@%s", got, c1)
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale lock is still there: %v", err)
	}

	// update-ref also locks HEAD (its log) when HEAD points at main: a
	// Core killed there leaves HEAD.lock, recovered the same way.
	c2 := w.pushBranch("ACME-2")
	headLock := filepath.Join(w.bare, "HEAD.lock")
	if err := os.WriteFile(headLock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(headLock, old, old); err != nil {
		t.Fatal(err)
	}
	if err := f.Merge(ctx, repo, forge.PullRequest{Branch: "ACME-2", Base: "main", HeadSHA: c2}); err != nil {
		t.Fatalf("Merge with a stale lock of HEAD: %v", err)
	}
	if _, err := os.Stat(headLock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale HEAD lock is still there: %v", err)
	}
}
