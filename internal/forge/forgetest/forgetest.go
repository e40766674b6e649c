// Package forgetest is the contract every forge.Forge passes: Run drives a
// forge through a Harness (new repositories, pushes, statuses, reviews,
// what people do by hand) and checks what the merge stage relies on —
// exactly one pull request per branch, adopted after a crash, the state as
// the forge sees it, merges of exactly the decided head, once — and what a
// ticket's changes read (Source: the case Changes, changes.go).
//
// A forge that lacks a feature says so in Caps and the cases that need it
// are skipped for it (plain git has no pull requests, checks or reviews, and
// only its test build merges).
package forgetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/forge"
)

// Caps says what a forge can do.
type Caps struct {
	PullRequests bool // real pull requests: titles and bodies, opened and closed by hand
	Merge        bool // Ballet merges (Forge.CanMerge)
	MergeOnce    bool // merging a merged pull request again merges nothing (every real forge; not gitforge.Merging, which counts re-merges)
	Checks       bool // commit statuses / check runs
	Reviews      bool // reviews by people with write access
	// CheckStates lists the check states (State*) Repo.SetStatus can
	// report on this forge.
	CheckStates []string
	Dismiss     bool // reviews can be dismissed (Repo.DismissReview)
	Protection  bool // branch protection (Repo.Protect)
	// ShareRepo: one repository may serve many parallel tests, each on
	// its own branch (its Repo methods are safe for concurrent use).
	ShareRepo bool
}

// Harness drives one forge for the contract.
type Harness interface {
	Forge() forge.Forge
	Caps() Caps
	// NewRepo makes a repository of its own for one test, with one commit
	// on its default branch "main" (safe for parallel tests).
	NewRepo(t testing.TB) Repo
}

// Repo is one repository of a Harness, and the people around it. Methods
// a forge's Caps rule out are never called.
type Repo interface {
	// Repo is the repository as Ballet's forge is given it.
	Repo() forge.Repo
	// Push pushes one more commit on branch (from main when the branch is
	// new) and returns the branch's new head.
	Push(t testing.TB, branch string) string
	// PullRequests lists the pull requests of branch on the forge, any
	// state (plain git: none).
	PullRequests(t testing.TB, branch string) []Opened
	// MergesOf counts the merges of commit sha into main.
	MergesOf(t testing.TB, sha string) int
	// MergeByHand merges branch into main as a person would, with a merge
	// commit (MergesOf counts it, on plain git too).
	MergeByHand(t testing.TB, pr forge.PullRequest)
	// OpenByHand opens a pull request of branch into main as a person
	// would, and returns its number (Caps.PullRequests).
	OpenByHand(t testing.TB, branch, title, body string) int
	// CloseByHand closes a pull request without merging (Caps.PullRequests).
	CloseByHand(t testing.TB, pr forge.PullRequest)
	// SetStatus reports a check (a State* of Caps.CheckStates) of context
	// on sha, as CI would: a commit status, or a check run named context
	// where CI reports only those (GitHub Actions) (Caps.Checks).
	SetStatus(t testing.TB, sha, context, state string)
	// DeleteBranch deletes branch on the forge, as a person would.
	DeleteBranch(t testing.TB, branch string)
	// DismissReview dismisses the latest review of reviewer 0 or 1 on the
	// pull request (Caps.Dismiss).
	DismissReview(t testing.TB, pr forge.PullRequest, reviewer int)
	// Protect protects main (Caps.Protection).
	Protect(t testing.TB, p Protection)
	// Review reviews the pull request as reviewer 0 or 1 (two people with
	// write access), approving or requesting changes with body, and returns
	// the reviewer's name (Caps.Reviews).
	Review(t testing.TB, pr forge.PullRequest, reviewer int, approve bool, body string) string
}

// Opened is a pull request as the forge lists it.
type Opened struct {
	Number      int
	Title, Body string
	Open        bool
}

// Run runs the contract on h.
func Run(t *testing.T, h Harness) {
	f := h.Forge()
	c := h.Caps()
	if f.CanMerge() != c.Merge {
		t.Fatalf("CanMerge() is %v, Caps.Merge %v", f.CanMerge(), c.Merge)
	}
	ctx := context.Background()
	ensure := func(t *testing.T, r Repo, branch string) forge.PullRequest {
		t.Helper()
		pr, err := f.EnsurePullRequest(ctx, r.Repo(), branch, "Ticket "+branch, "body of "+branch+"\n\n"+forge.Marker(branch, "flow-1"))
		if err != nil {
			t.Fatalf("EnsurePullRequest(%s): %v", branch, err)
		}
		return pr
	}
	state := func(t *testing.T, r Repo, pr forge.PullRequest) forge.State {
		t.Helper()
		st, err := f.State(ctx, r.Repo(), pr)
		if err != nil {
			t.Fatalf("State(%+v): %v", pr, err)
		}
		return st
	}
	// ballet merges as Ballet does: a forge may refuse for now what it
	// called mergeable a moment ago (Gitea re-checks after a push: 405 "try
	// again later"), and the merge stage then checks again — so does this.
	ballet := func(t *testing.T, r Repo, pr forge.PullRequest) {
		t.Helper()
		for try := 1; ; try++ {
			err := f.Merge(ctx, r.Repo(), pr)
			if err == nil {
				return
			}
			if !errors.Is(err, forge.ErrNotMergeable) || try == 5 {
				t.Fatalf("Merge(%+v), try %d: %v", pr, try, err)
			}
			waitMergeable(t, f, r, pr)
		}
	}
	// merge merges as Ballet does where it can, else by hand.
	merge := func(t *testing.T, r Repo, pr forge.PullRequest) {
		t.Helper()
		if !c.Merge {
			r.MergeByHand(t, pr)
			return
		}
		ballet(t, r, pr)
	}
	count := func(t *testing.T, r Repo, branch string, want int) []Opened {
		t.Helper()
		prs := r.PullRequests(t, branch)
		if !c.PullRequests {
			want = 0
		}
		if len(prs) != want {
			t.Fatalf("%d pull requests of %s on the forge, want %d: %+v", len(prs), branch, want, prs)
		}
		return prs
	}
	run := func(name string, need bool, fn func(t *testing.T, r Repo)) {
		t.Run(name, func(t *testing.T) {
			if !need {
				t.Skip("the forge cannot do this")
			}
			t.Parallel()
			fn(t, h.NewRepo(t))
		})
	}

	run("Changes", true, func(t *testing.T, r Repo) { changes(t, f, c, r) })

	run("NotPushed", true, func(t *testing.T, r Repo) {
		_, err := f.EnsurePullRequest(ctx, r.Repo(), "ballet/ACME-1", "t", "b")
		if !errors.Is(err, forge.ErrBranchNotPushed) {
			t.Fatalf("EnsurePullRequest of a branch never pushed: %v, want ErrBranchNotPushed", err)
		}
		count(t, r, "ballet/ACME-1", 0)
	})

	run("OpenThenEnsureAgain", true, func(t *testing.T, r Repo) {
		sha := r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		if pr.Branch != "ballet/ACME-1" || pr.Base != "main" || pr.HeadSHA != sha || (c.PullRequests && (pr.Number <= 0 || pr.URL == "")) {
			t.Fatalf("pull request %+v, want ballet/ACME-1 into main at %s", pr, sha)
		}
		if again := ensure(t, r, "ballet/ACME-1"); again != pr {
			t.Fatalf("second EnsurePullRequest %+v, want %+v", again, pr)
		}
		prs := count(t, r, "ballet/ACME-1", 1)
		if c.PullRequests {
			if prs[0].Number != pr.Number || prs[0].Title != "Ticket ballet/ACME-1" || !forge.HasMarker(prs[0].Body) || !prs[0].Open {
				t.Fatalf("on the forge: %+v, want #%d with the title and the marker", prs[0], pr.Number)
			}
		}
		st := state(t, r, pr)
		if !st.BranchPushed || !st.Open || st.Merged || st.Closed || st.HeadSHA != sha || st.Branch != pr.Branch || st.Base != "main" {
			t.Fatalf("open: %+v", st)
		}
		// A push moves the head the state reports; the pull request stays.
		sha2 := r.Push(t, "ballet/ACME-1")
		if st = state(t, r, pr); !st.Open || st.HeadSHA != sha2 {
			t.Fatalf("after a push: %+v, want open at %s", st, sha2)
		}
		if again := ensure(t, r, "ballet/ACME-1"); again.Number != pr.Number || again.HeadSHA != sha2 {
			t.Fatalf("EnsurePullRequest after a push: %+v, want #%d at %s", again, pr.Number, sha2)
		}
		count(t, r, "ballet/ACME-1", 1)
	})

	run("AdoptOpenedByHand", c.PullRequests, func(t *testing.T, r Repo) {
		r.Push(t, "ballet/ACME-1")
		n := r.OpenByHand(t, "ballet/ACME-1", "by hand", "no marker")
		if pr := ensure(t, r, "ballet/ACME-1"); pr.Number != n {
			t.Fatalf("EnsurePullRequest opened #%d, want the one opened by hand #%d", pr.Number, n)
		}
		count(t, r, "ballet/ACME-1", 1)
	})

	run("MergedAdoptedAfterCrash", true, func(t *testing.T, r Repo) {
		sha := r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		merge(t, r, pr)
		// Core crashed before it recorded the merge: it ensures again.
		again := ensure(t, r, "ballet/ACME-1")
		if again.Number != pr.Number || again.HeadSHA != sha {
			t.Fatalf("EnsurePullRequest after the merge: %+v, want %+v", again, pr)
		}
		count(t, r, "ballet/ACME-1", 1)
		st := state(t, r, again)
		if !st.Merged || st.Open || st.Closed || st.HeadSHA != sha {
			t.Fatalf("merged: %+v, want merged at %s", st, sha)
		}
		if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, c.Merge, st); d.Action != forge.ActionDone {
			t.Fatalf("Decide after the merge: %+v", d)
		}
		if n := r.MergesOf(t, sha); n != 1 {
			t.Fatalf("%d merges of %s, want 1", n, sha)
		}
	})

	run("ClosedByHand", c.PullRequests, func(t *testing.T, r Repo) {
		r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		r.CloseByHand(t, pr)
		st := state(t, r, pr)
		if !st.Closed || st.Open || st.Merged || !st.BranchPushed {
			t.Fatalf("closed: %+v", st)
		}
		if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, c.Merge, st); d.Action != forge.ActionFailed {
			t.Fatalf("Decide on a closed pull request: %+v", d)
		}
		// Closed as it is: adopted, not opened again.
		if again := ensure(t, r, "ballet/ACME-1"); again.Number != pr.Number {
			t.Fatalf("EnsurePullRequest after a close: %+v, want #%d", again, pr.Number)
		}
		count(t, r, "ballet/ACME-1", 1)
		// New work on the branch: a new pull request.
		r.Push(t, "ballet/ACME-1")
		if again := ensure(t, r, "ballet/ACME-1"); again.Number == pr.Number {
			t.Fatalf("EnsurePullRequest after new work on a closed pull request's branch adopted the closed #%d", pr.Number)
		}
		count(t, r, "ballet/ACME-1", 2)
	})

	run("Close", true, func(t *testing.T, r Repo) {
		r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		for i := range 2 {
			if err := f.Close(ctx, r.Repo(), pr); err != nil {
				t.Fatalf("Close #%d: %v", i+1, err)
			}
		}
		if c.PullRequests {
			if st := state(t, r, pr); !st.Closed || st.Open {
				t.Fatalf("after Close: %+v", st)
			}
		}
		r.Push(t, "ballet/ACME-2")
		pr2 := ensure(t, r, "ballet/ACME-2")
		merge(t, r, pr2)
		if err := f.Close(ctx, r.Repo(), pr2); err != nil {
			t.Fatalf("Close of a merged pull request: %v", err)
		}
		if st := state(t, r, pr2); !st.Merged {
			t.Fatalf("a merged pull request after Close: %+v", st)
		}
	})

	run("Checks", true, func(t *testing.T, r Repo) {
		sha := r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		st := state(t, r, pr)
		if st.Checks != forge.ChecksNone || len(st.PendingChecks)+len(st.FailingChecks)+len(st.PassedChecks) != 0 {
			t.Fatalf("no checks reported: %+v, want none", st)
		}
		if !c.Checks {
			return
		}
		r.SetStatus(t, sha, "ci/build", "pending")
		if st = state(t, r, pr); st.Checks != forge.ChecksPending || !slices.Equal(st.PendingChecks, []string{"ci/build"}) {
			t.Fatalf("pending: %+v", st)
		}
		r.SetStatus(t, sha, "ci/build", "success")
		if st = state(t, r, pr); st.Checks != forge.ChecksSuccess || !slices.Equal(st.PassedChecks, []string{"ci/build"}) || len(st.PendingChecks) != 0 {
			t.Fatalf("success: %+v", st)
		}
		r.SetStatus(t, sha, "ci/lint", "failure")
		st = state(t, r, pr)
		if st.Checks != forge.ChecksFailure || !slices.Equal(st.FailingChecks, []string{"ci/lint"}) || !slices.Equal(st.PassedChecks, []string{"ci/build"}) {
			t.Fatalf("failure: %+v", st)
		}
		if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, c.Merge, st); d.Action != forge.ActionFailed || !strings.Contains(d.Reason, "ci/lint") {
			t.Fatalf("Decide on a failed check: %+v", d)
		}
		// A new head has no statuses yet.
		r.Push(t, "ballet/ACME-1")
		if st = state(t, r, pr); st.Checks != forge.ChecksNone {
			t.Fatalf("new head: %+v, want no checks", st)
		}
	})

	run("Reviews", true, func(t *testing.T, r Repo) {
		r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		if st := state(t, r, pr); st.Approvals != 0 || st.ChangesRequested {
			t.Fatalf("no reviews: %+v", st)
		}
		if !c.Reviews {
			return
		}
		r.Review(t, pr, 0, true, "looks good")
		if st := state(t, r, pr); st.Approvals != 1 || st.ChangesRequested {
			t.Fatalf("one approval: %+v", st)
		}
		name := r.Review(t, pr, 1, false, "please rename x")
		st := state(t, r, pr)
		if st.Approvals != 1 || !st.ChangesRequested || !slices.Equal(st.ChangeRequests, []string{name + ": please rename x"}) {
			t.Fatalf("changes requested: %+v, want %q", st, name+": please rename x")
		}
		d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 1}, c.Merge, st)
		if d.Action != forge.ActionFailed || !strings.Contains(d.Reason, "please rename x") {
			t.Fatalf("Decide on changes requested: %+v", d)
		}
		// The latest review of each reviewer wins.
		r.Review(t, pr, 1, true, "renamed, thanks")
		if st = state(t, r, pr); st.Approvals != 2 || st.ChangesRequested || len(st.ChangeRequests) != 0 {
			t.Fatalf("changes requested, then approved: %+v", st)
		}
		r.Review(t, pr, 0, false, "one more thing")
		if st = state(t, r, pr); st.Approvals != 1 || !st.ChangesRequested {
			t.Fatalf("approved, then changes requested: %+v", st)
		}
	})

	run("MergeTheDecidedHead", c.Merge, func(t *testing.T, r Repo) {
		r.Push(t, "ballet/ACME-1")
		sha := r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		st := waitMergeable(t, f, r, pr)
		if d := forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, true, st); d.Action != forge.ActionMerge {
			t.Fatalf("Decide: %+v, want merge", d)
		}
		pr.HeadSHA = st.HeadSHA
		ballet(t, r, pr)
		if st = state(t, r, pr); !st.Merged || st.HeadSHA != sha {
			t.Fatalf("after Merge: %+v, want merged at %s", st, sha)
		}
		if n := r.MergesOf(t, sha); n != 1 {
			t.Fatalf("%d merges of %s, want 1", n, sha)
		}
		// The branch moves on after the merge: still merged, at the head merged.
		r.Push(t, "ballet/ACME-1")
		if st = state(t, r, pr); !st.Merged || st.HeadSHA != sha {
			t.Fatalf("merged, then pushed: %+v, want merged at %s", st, sha)
		}
	})

	run("PushAfterTheDecision", c.Merge, func(t *testing.T, r Repo) {
		r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		st := waitMergeable(t, f, r, pr)
		decided := pr
		decided.HeadSHA = st.HeadSHA
		later := r.Push(t, "ballet/ACME-1")
		err := f.Merge(ctx, r.Repo(), decided)
		if !errors.Is(err, forge.ErrOutOfDate) {
			t.Fatalf("Merge of a head that moved: %v, want ErrOutOfDate", err)
		}
		if n, m := r.MergesOf(t, decided.HeadSHA), r.MergesOf(t, later); n != 0 || m != 0 {
			t.Fatalf("merged %d and %d times after a refused merge, want 0", n, m)
		}
		if st = state(t, r, pr); !st.Open || st.Merged || st.HeadSHA != later {
			t.Fatalf("after the refused merge: %+v, want open at %s", st, later)
		}
	})

	run("MergeTwice", c.Merge && c.MergeOnce, func(t *testing.T, r Repo) {
		sha := r.Push(t, "ballet/ACME-1")
		pr := ensure(t, r, "ballet/ACME-1")
		waitMergeable(t, f, r, pr)
		ballet(t, r, pr)
		if err := f.Merge(ctx, r.Repo(), pr); err != nil { // merged at this head already: success, no second merge
			t.Fatalf("the second Merge: %v", err)
		}
		if n := r.MergesOf(t, sha); n != 1 {
			t.Fatalf("%d merges of %s after two Merge calls, want 1", n, sha)
		}
	})
}

// waitMergeable reads the state until the forge knows whether the pull
// request merges (bounded: a forge that never knows fails the test).
func waitMergeable(t *testing.T, f forge.Forge, r Repo, pr forge.PullRequest) forge.State {
	t.Helper()
	var st forge.State
	for range 50 {
		var err error
		if st, err = f.State(context.Background(), r.Repo(), pr); err != nil {
			t.Fatalf("State: %v", err)
		}
		if st.Mergeable != nil {
			if !*st.Mergeable {
				t.Fatalf("not mergeable: %+v", st)
			}
			return st
		}
	}
	t.Fatalf("the forge never knew whether %s merges: %+v", pr.Branch, st)
	return st
}
