package forgetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/forge"
)

// Check states a Repo's SetStatus reports, as CI would (each forge lists
// those it can report in Caps.CheckStates). Pending, success and failure
// every forge with checks reports; the others are one forge's words:
// error (a commit status on Gitea and GitHub), warning and skipped (Gitea),
// neutral, cancelled, skipped, timed_out, action_required and stale (a
// GitHub check run's conclusion); unknown is a state no forge documents
// today (a conclusion GitHub may add).
const (
	StatePending        = "pending"
	StateSuccess        = "success"
	StateFailure        = "failure"
	StateError          = "error"
	StateWarning        = "warning"
	StateSkipped        = "skipped"
	StateNeutral        = "neutral"
	StateCancelled      = "cancelled"
	StateTimedOut       = "timed_out"
	StateActionRequired = "action_required"
	StateStale          = "stale"
	StateUnknown        = "unknown"
)

// Protection is a branch protection of main (Caps.Protection): merges need
// Checks to have passed and Approvals approvals, and with DismissStale a
// push dismisses the pull request's approvals.
type Protection struct {
	Checks       []string
	Approvals    int
	DismissStale bool
}

// The decisions a policy row expects, as "action" or "action waiting".
const (
	wantMerge       = forge.ActionMerge
	wantDone        = forge.ActionDone
	wantFailed      = forge.ActionFailed
	wantWaitChecks  = forge.ActionWait + " " + forge.WaitChecks
	wantWaitReview  = forge.ActionWait + " " + forge.WaitReview
	wantWaitHuman   = forge.ActionWait + " " + forge.WaitMerge
	cannotMergeHere = "Ballet cannot merge on this forge"
)

// scene is one policy row's pull request on the forge, and the people and
// CI around it.
type scene struct {
	t      *testing.T
	f      forge.Forge
	r      Repo
	branch string
	pr     forge.PullRequest
	head   string // the branch's head commit
	names  map[string]string
}

// push pushes one more commit on the branch.
func (s *scene) push() { s.head = s.r.Push(s.t, s.branch) }

// ci reports check name on the current head.
func (s *scene) ci(name, state string) { s.r.SetStatus(s.t, s.head, name, state) }

func (s *scene) approve(reviewer int) { s.review(reviewer, true, "looks good") }

func (s *scene) requestChanges(reviewer int, body string) { s.review(reviewer, false, body) }

// review reviews as reviewer 0 or 1, whose name the row's reason calls %r
// or %R.
func (s *scene) review(reviewer int, approve bool, body string) {
	s.names[[]string{"%r", "%R"}[reviewer]] = s.r.Review(s.t, s.pr, reviewer, approve, body)
}

// policyRow is one situation of a pull request and what the merge stage
// decides on every forge that can set it up.
type policyRow struct {
	name   string
	policy forge.Policy
	need   func(Caps) bool // nil: every forge
	own    bool            // needs a repository of its own (it protects or moves main)
	setup  func(s *scene)
	want   string // wantMerge, wantDone, …
	reason string // a substring of the decision's reason; %s is the row's branch, %r reviewer 0's name, %R reviewer 1's
	// merge, when want is wantMerge on a forge where Ballet merges: what
	// Forge.Merge then answers (nil: it merges the head, once), as the
	// stage would call it.
	merge error
}

var (
	auto      = forge.Policy{Mode: forge.PolicyAuto}
	manual    = forge.Policy{Mode: forge.PolicyManual}
	oneReview = forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 1}
	twoReview = forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 2}
	needCI    = forge.Policy{Mode: forge.PolicyAuto, RequiredChecks: []string{"ci"}}
)

func checks(c Caps) bool  { return c.Checks }
func reviews(c Caps) bool { return c.Reviews }
func prs(c Caps) bool     { return c.PullRequests }
func state(name string) func(Caps) bool {
	return func(c Caps) bool { return c.Checks && slices.Contains(c.CheckStates, name) }
}

// policyRows is the merge policy, one row a situation. Every forge that can
// set a row up must reach the same decision.
func policyRows() []policyRow {
	rows := []policyRow{
		// A pull request with nothing to wait for.
		{name: "AllClear", policy: auto, want: wantMerge, reason: "is ready: merging it into main"},
		{name: "AllClearManual", policy: manual, want: wantWaitHuman, reason: "the merge policy is manual"},
		{name: "NoChecksNoneRequired", policy: auto, need: checks, want: wantMerge, reason: "ready"},

		// Pull requests that ended.
		{name: "MergedByHand", policy: auto, own: true, setup: func(s *scene) { s.r.MergeByHand(s.t, s.pr) },
			want: wantDone, reason: "the branch %s was merged into main"},
		{name: "MergedThenBranchDeleted", policy: auto, own: true, setup: func(s *scene) {
			s.r.MergeByHand(s.t, s.pr)
			s.r.DeleteBranch(s.t, s.branch)
		}, want: wantDone, reason: "merged into main"},
		{name: "MergedDespiteFailingCheck", policy: auto, own: true, need: checks, setup: func(s *scene) {
			s.ci("ci", StateFailure)
			s.r.MergeByHand(s.t, s.pr)
		}, want: wantDone, reason: "merged"},
		{name: "ClosedByHand", policy: auto, need: prs, setup: func(s *scene) { s.r.CloseByHand(s.t, s.pr) },
			want: wantFailed, reason: "the pull request was closed without merging"},
		{name: "ClosedWithChangesRequested", policy: auto, need: reviews, setup: func(s *scene) {
			s.requestChanges(0, "no")
			s.r.CloseByHand(s.t, s.pr)
		}, want: wantFailed, reason: "closed without merging"},
		{name: "BranchDeletedUnmerged", policy: auto, setup: func(s *scene) { s.r.DeleteBranch(s.t, s.branch) },
			want: wantFailed, reason: "the branch %s was deleted without being merged into main"},

		// Reviews.
		{name: "ApprovalsRequiredNone", policy: oneReview, want: wantWaitReview, reason: "waiting for review: 0 of 1 required approvals"},
		{name: "ApprovalsRequiredManualPolicy", policy: forge.Policy{Mode: forge.PolicyManual, RequiredApprovals: 1},
			want: wantWaitReview, reason: "0 of 1"},
		{name: "FreshApproval", policy: oneReview, need: reviews, setup: func(s *scene) { s.approve(0) },
			want: wantMerge, reason: "ready"},
		{name: "ApprovalOfAnEarlierCommit", policy: oneReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.push() // code nobody approved
		}, want: wantWaitReview, reason: "0 of 1 required approvals"},
		{name: "ApprovalDismissedByAPush", policy: oneReview, own: true, need: func(c Caps) bool { return c.Reviews && c.Protection }, setup: func(s *scene) {
			s.r.Protect(s.t, Protection{DismissStale: true})
			s.approve(0)
			s.push()
		}, want: wantWaitReview, reason: "0 of 1 required approvals"},
		{name: "ApprovedAgainAfterThePush", policy: oneReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.push()
			s.approve(0)
		}, want: wantMerge, reason: "ready"},
		{name: "ApprovalDismissed", policy: oneReview, need: func(c Caps) bool { return c.Reviews && c.Dismiss }, setup: func(s *scene) {
			s.approve(0)
			s.r.DismissReview(s.t, s.pr, 0)
		}, want: wantWaitReview, reason: "0 of 1"},
		{name: "OneOfTwoApprovals", policy: twoReview, need: reviews, setup: func(s *scene) { s.approve(0) },
			want: wantWaitReview, reason: "waiting for review: 1 of 2 required approvals"},
		{name: "OneReviewerApprovingTwice", policy: twoReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.approve(0)
		}, want: wantWaitReview, reason: "1 of 2"},
		{name: "TwoOfTwoApprovals", policy: twoReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.approve(1)
		}, want: wantMerge, reason: "ready"},
		{name: "MoreApprovalsThanRequired", policy: oneReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.approve(1)
		}, want: wantMerge, reason: "ready"},
		{name: "ChangesRequested", policy: auto, need: reviews, setup: func(s *scene) { s.requestChanges(1, "please rename x") },
			want: wantFailed, reason: "changes were requested: %R: please rename x"},
		{name: "ChangesRequestedDespiteAnApproval", policy: oneReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.requestChanges(1, "not yet")
		}, want: wantFailed, reason: "changes were requested: %R: not yet"},
		{name: "ChangesRequestedThenApproved", policy: oneReview, need: reviews, setup: func(s *scene) {
			s.requestChanges(0, "rename x")
			s.approve(0)
		}, want: wantMerge, reason: "ready"},
		{name: "ApprovedThenChangesRequested", policy: oneReview, need: reviews, setup: func(s *scene) {
			s.approve(0)
			s.requestChanges(0, "one more thing")
		}, want: wantFailed, reason: "changes were requested: %r: one more thing"},
		{name: "ChangesRequestedOnAnEarlierCommit", policy: auto, need: reviews, setup: func(s *scene) {
			s.requestChanges(0, "rename x")
			s.push() // the agent's answer: the reviewer has not looked yet
		}, want: wantWaitReview, reason: "changes were requested on an earlier commit: %r: rename x"},
		{name: "ChangesRequestedOnAnEarlierCommitThenApproved", policy: auto, need: reviews, setup: func(s *scene) {
			s.requestChanges(0, "rename x")
			s.push()
			s.approve(0)
		}, want: wantMerge, reason: "ready"},
		{name: "ChangesRequestedDismissed", policy: auto, need: func(c Caps) bool { return c.Reviews && c.Dismiss }, setup: func(s *scene) {
			s.requestChanges(0, "no")
			s.r.DismissReview(s.t, s.pr, 0)
		}, want: wantMerge, reason: "ready"},

		// Checks: a required one not reported, and what each state means.
		{name: "RequiredCheckMissing", policy: needCI, want: wantWaitChecks, reason: "waiting for checks: ci"},
		{name: "RequiredCheckMissingOthersPassed", policy: needCI, need: checks, setup: func(s *scene) { s.ci("lint", StateSuccess) },
			want: wantWaitChecks, reason: "waiting for checks: ci"},
		{name: "RequiredCheckPassedOnAnEarlierCommit", policy: needCI, need: checks, setup: func(s *scene) {
			s.ci("ci", StateSuccess)
			s.push()
		}, want: wantWaitChecks, reason: "waiting for checks: ci"},
		{name: "RequiredCheckPassed", policy: needCI, need: checks, setup: func(s *scene) { s.ci("ci", StateSuccess) },
			want: wantMerge, reason: "ready"},
		{name: "FailingCheckBeatsChangesRequested", policy: auto, need: func(c Caps) bool { return c.Checks && c.Reviews }, setup: func(s *scene) {
			s.ci("ci", StateFailure)
			s.requestChanges(0, "no")
		}, want: wantFailed, reason: "checks failed: ci"},
		{name: "PendingCheckBeatsMissingReview", policy: oneReview, need: checks, setup: func(s *scene) { s.ci("ci", StatePending) },
			want: wantWaitChecks, reason: "waiting for checks: ci"},
		{name: "FailureBeatsPending", policy: auto, need: checks, setup: func(s *scene) {
			s.ci("build", StatePending)
			s.ci("ci", StateFailure)
		}, want: wantFailed, reason: "checks failed: ci"},
		{name: "LatestStatusOfAContextWins", policy: needCI, need: checks, setup: func(s *scene) {
			s.ci("ci", StateFailure)
			s.ci("ci", StateSuccess) // CI ran again
		}, want: wantMerge, reason: "ready"},

		// Branch protection: the forge refuses what it protects, whatever
		// Ballet's policy says, and the stage checks again.
		{name: "ProtectedBranchRefuses", policy: auto, own: true, need: func(c Caps) bool { return c.Protection && c.Checks && c.Merge }, setup: func(s *scene) {
			s.r.Protect(s.t, Protection{Checks: []string{"ci"}, Approvals: 1})
		}, want: wantMerge, reason: "ready", merge: forge.ErrNotMergeable},
		{name: "ProtectedBranchSatisfied", policy: auto, own: true, need: func(c Caps) bool { return c.Protection && c.Checks && c.Reviews && c.Merge }, setup: func(s *scene) {
			s.r.Protect(s.t, Protection{Checks: []string{"ci"}, Approvals: 1})
			s.ci("ci", StateSuccess)
			s.approve(0)
		}, want: wantMerge, reason: "ready"},
	}
	// Each state a check can be in, alone on the head commit.
	for _, c := range []struct {
		state, want, reason string
	}{
		{StatePending, wantWaitChecks, "waiting for checks: ci"},
		{StateSuccess, wantMerge, "ready"},
		{StateFailure, wantFailed, "checks failed: ci"},
		{StateError, wantFailed, "checks failed: ci"},
		{StateWarning, wantMerge, "ready"},
		{StateSkipped, wantMerge, "ready"},
		{StateNeutral, wantMerge, "ready"},
		{StateCancelled, wantFailed, "checks failed: ci"},
		{StateTimedOut, wantFailed, "checks failed: ci"},
		{StateActionRequired, wantFailed, "checks failed: ci"},
		{StateStale, wantFailed, "checks failed: ci"},
		{StateUnknown, wantFailed, "checks failed: ci"},
	} {
		rows = append(rows, policyRow{name: "Check_" + c.state, policy: auto, need: state(c.state),
			setup: func(s *scene) { s.ci("ci", c.state) }, want: c.want, reason: c.reason})
		// The same state of a required check: only a pass lets it merge.
		req := policyRow{name: "RequiredCheck_" + c.state, policy: needCI, need: state(c.state),
			setup: func(s *scene) { s.ci("ci", c.state) }, want: c.want, reason: c.reason}
		rows = append(rows, req)
	}
	return rows
}

// Policy runs the merge-policy table on h: each row sets up a pull request
// on the forge (pushes, CI, reviews, people closing, merging, deleting,
// protecting), reads its State and asserts Decide's answer — the action,
// what it waits for and why — and, where Ballet merges, what Merge then
// does. A row the forge cannot set up (Caps) is skipped for it; every
// other row must end in the same decision on every forge.
func Policy(t *testing.T, h Harness) {
	f := h.Forge()
	c := h.Caps()
	var shared Repo
	if c.ShareRepo {
		shared = h.NewRepo(t)
	}
	n := 0
	for _, row := range policyRows() {
		n++
		branch := "ballet/POL-" + strconv.Itoa(n)
		t.Run(row.name, func(t *testing.T) {
			if row.need != nil && !row.need(c) {
				t.Skip("the forge cannot set this up")
			}
			t.Parallel()
			r := shared
			if r == nil || row.own {
				r = h.NewRepo(t)
			}
			runRow(t, f, c, r, branch, row)
		})
	}
}

func runRow(t *testing.T, f forge.Forge, c Caps, r Repo, branch string, row policyRow) {
	ctx := context.Background()
	s := &scene{t: t, f: f, r: r, branch: branch, names: map[string]string{"%s": branch}}
	s.push()
	pr, err := f.EnsurePullRequest(ctx, r.Repo(), branch, "Ticket "+branch, forge.Marker(branch, "flow-1"))
	if err != nil {
		t.Fatalf("EnsurePullRequest: %v", err)
	}
	s.pr = pr
	if row.setup != nil {
		row.setup(s)
	}
	st := settled(t, f, c, r, pr)
	want, reason := row.want, row.reason
	if want == wantMerge && !c.Merge {
		want, reason = wantWaitHuman, cannotMergeHere
	}
	for k, v := range s.names {
		reason = strings.ReplaceAll(reason, k, v)
	}
	d := forge.Decide(row.policy, f.CanMerge(), st)
	got := d.Action
	if d.Waiting != "" {
		got += " " + d.Waiting
	}
	if got != want || !strings.Contains(d.Reason, reason) {
		t.Fatalf("Decide = %s %q, want %s with %q\nstate: %+v", got, d.Reason, want, reason, st)
	}
	if want != wantMerge || !row.own {
		return // merging is the contract's; a shared repository's main stays
	}
	// Merge what was decided, as the stage does: a forge may refuse for now
	// what it just called mergeable (Gitea re-checks), and the stage reads
	// the state again.
	decided := pr
	decided.HeadSHA = st.HeadSHA
	for try := 1; ; try++ {
		err = f.Merge(ctx, r.Repo(), decided)
		if row.merge != nil || !errors.Is(err, forge.ErrNotMergeable) || try == 5 {
			break
		}
		settled(t, f, c, r, pr)
	}
	switch {
	case row.merge != nil && !errors.Is(err, row.merge):
		t.Fatalf("Merge: %v, want %v", err, row.merge)
	case row.merge != nil:
		if n := r.MergesOf(t, st.HeadSHA); n != 0 {
			t.Fatalf("Merge refused, yet %s was merged %d times", st.HeadSHA, n)
		}
	case err != nil:
		t.Fatalf("Merge: %v", err)
	default:
		if n := r.MergesOf(t, st.HeadSHA); n != 1 {
			t.Fatalf("%s merged %d times, want 1", st.HeadSHA, n)
		}
	}
}

// settled reads the state until a forge where Ballet merges knows whether
// an open pull request merges (bounded), as the stage would keep polling.
func settled(t *testing.T, f forge.Forge, c Caps, r Repo, pr forge.PullRequest) forge.State {
	t.Helper()
	var st forge.State
	for range 50 {
		var err error
		if st, err = f.State(context.Background(), r.Repo(), pr); err != nil {
			t.Fatalf("State: %v", err)
		}
		if !c.Merge || !st.Open || st.Mergeable != nil {
			return st
		}
	}
	t.Fatalf("the forge never knew whether %s merges: %+v", pr.Branch, st)
	return st
}
