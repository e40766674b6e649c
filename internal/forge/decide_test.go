package forge

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	auto := Policy{Mode: PolicyAuto}
	manual := Policy{Mode: PolicyManual}
	strict := Policy{Mode: PolicyAuto, RequiredApprovals: 2, RequiredChecks: []string{"build", "test"}}
	// open is a pushed, open pull request that auto merge would merge.
	open := func(f func(*State)) State {
		st := State{Branch: "ACME-1", Base: "main", BranchPushed: true, Open: true, HeadSHA: "abc",
			Checks: ChecksSuccess, PassedChecks: []string{"build", "test"}, Approvals: 2, Mergeable: &yes}
		if f != nil {
			f(&st)
		}
		return st
	}
	tests := []struct {
		name     string
		policy   Policy
		canMerge bool
		st       State
		action   string
		waiting  string
		reason   string // a substring of the reason
	}{
		// 1. merged wins over everything.
		{"merged", auto, true, open(func(s *State) { s.Open, s.Merged = false, true }), ActionDone, "", "the branch ACME-1 was merged into main"},
		{"merged beats closed", auto, true, open(func(s *State) { s.Merged, s.Closed = true, true }), ActionDone, "", "merged"},
		{"merged beats branch deleted", auto, true, open(func(s *State) { s.BranchPushed, s.Merged = false, true }), ActionDone, "", "merged"},
		{"merged beats failing checks", auto, true, open(func(s *State) { s.Merged, s.Checks, s.FailingChecks = true, ChecksFailure, []string{"lint"} }), ActionDone, "", "merged"},
		{"merged on plain git", manual, false, State{Branch: "b", Base: "main", Merged: true, Checks: ChecksNone}, ActionDone, "", "the branch b was merged into main"},
		{"merged without names", auto, true, State{Merged: true}, ActionDone, "", "the branch was merged into the default branch"},
		// 2. closed without merging.
		{"closed", auto, true, open(func(s *State) { s.Open, s.Closed = false, true }), ActionFailed, "", "the pull request was closed without merging"},
		{"closed beats failing checks", auto, true, open(func(s *State) { s.Closed, s.FailingChecks = true, []string{"lint"} }), ActionFailed, "", "closed without merging"},
		{"branch deleted unmerged", manual, false, State{Branch: "b", Base: "main", Closed: true, HeadSHA: "abc", Checks: ChecksNone}, ActionFailed, "", "the branch b was deleted without being merged into main"},
		// 3. never pushed.
		{"never pushed", auto, true, State{Branch: "ACME-1", Base: "main"}, ActionFailed, "", "the branch ACME-1 was never pushed"},
		{"never pushed on plain git", manual, false, State{Branch: "x", Base: "main", Checks: ChecksNone}, ActionFailed, "", "the branch x was never pushed"},
		// 4. failing checks.
		{"failing checks", auto, true, open(func(s *State) { s.Checks, s.FailingChecks = ChecksFailure, []string{"lint", "test"} }), ActionFailed, "", "checks failed: lint, test"},
		{"failure without names", auto, true, open(func(s *State) { s.Checks = ChecksFailure }), ActionFailed, "", "the checks failed"},
		{"a failing check while others pend", strict, true, open(func(s *State) { s.Checks, s.FailingChecks = ChecksPending, []string{"lint"} }), ActionFailed, "", "checks failed: lint"},
		{"a required check failing", strict, true, open(func(s *State) {
			s.Checks, s.FailingChecks, s.PassedChecks = ChecksFailure, []string{"test"}, []string{"build"}
		}), ActionFailed, "", "checks failed: test"},
		{"failing checks beat changes requested", auto, true, open(func(s *State) { s.FailingChecks, s.ChangesRequested = []string{"lint"}, true }), ActionFailed, "", "checks failed"},
		{"failing checks under manual policy", manual, true, open(func(s *State) { s.FailingChecks = []string{"lint"} }), ActionFailed, "", "checks failed: lint"},
		// 5. changes requested.
		{"changes requested", auto, true, open(func(s *State) {
			s.ChangesRequested, s.ChangeRequests = true, []string{"alice: rename Foo", "bob: add a test"}
		}), ActionFailed, "", "changes were requested: alice: rename Foo; bob: add a test"},
		{"changes requested without text", auto, true, open(func(s *State) { s.ChangesRequested = true }), ActionFailed, "", "changes were requested in a review"},
		{"changes requested beat pending checks", strict, true, open(func(s *State) { s.Checks, s.ChangesRequested = ChecksPending, true }), ActionFailed, "", "changes were requested"},
		{"changes requested beat conflict", auto, true, open(func(s *State) { s.ChangesRequested, s.Mergeable = true, &no }), ActionFailed, "", "changes were requested"},
		{"changes requested despite approvals", strict, true, open(func(s *State) { s.ChangesRequested, s.Approvals = true, 5 }), ActionFailed, "", "changes were requested"},
		// 6. conflict.
		{"conflict", auto, true, open(func(s *State) { s.Mergeable = &no }), ActionFailed, "", "the branch ACME-1 conflicts with main"},
		{"conflict beats pending checks", strict, true, open(func(s *State) { s.Checks, s.Mergeable = ChecksPending, &no }), ActionFailed, "", "conflicts with main"},
		{"conflict under manual policy", manual, true, open(func(s *State) { s.Mergeable = &no }), ActionFailed, "", "conflicts with main"},
		// 7. checks pending or required checks missing.
		{"checks pending", auto, true, open(func(s *State) { s.Checks, s.PendingChecks = ChecksPending, []string{"build"} }), ActionWait, WaitChecks, "waiting for checks: build"},
		{"checks pending without names", auto, true, open(func(s *State) { s.Checks = ChecksPending }), ActionWait, WaitChecks, "waiting for the checks to finish"},
		{"required check not reported", strict, true, open(func(s *State) { s.PassedChecks = []string{"build", "lint"} }), ActionWait, WaitChecks, "waiting for checks: test"},
		{"required checks with no checks at all", strict, true, open(func(s *State) { s.Checks, s.PassedChecks = ChecksNone, nil }), ActionWait, WaitChecks, "waiting for checks: build, test"},
		{"pending and missing listed once", strict, true, open(func(s *State) {
			s.Checks, s.PendingChecks, s.PassedChecks = ChecksPending, []string{"test", "lint"}, []string{"build"}
		}), ActionWait, WaitChecks, "waiting for checks: test, lint"},
		{"pending checks beat review", strict, true, open(func(s *State) { s.Checks, s.Approvals = ChecksPending, 0 }), ActionWait, WaitChecks, "checks"},
		{"pending checks beat manual", manual, true, open(func(s *State) { s.Checks = ChecksPending }), ActionWait, WaitChecks, "checks"},
		{"pending checks beat unknown mergeability", auto, true, open(func(s *State) { s.Checks, s.Mergeable = ChecksPending, nil }), ActionWait, WaitChecks, "waiting for the checks"},
		{"unknown check state", auto, true, open(func(s *State) { s.Checks = "error" }), ActionWait, WaitChecks, `unknown state "error"`},
		// 8. review.
		{"too few approvals", strict, true, open(func(s *State) { s.Approvals = 1 }), ActionWait, WaitReview, "waiting for review: 1 of 2 required approvals"},
		{"no approvals", strict, true, open(func(s *State) { s.Approvals = 0 }), ActionWait, WaitReview, "0 of 2"},
		{"review beats manual", Policy{Mode: PolicyManual, RequiredApprovals: 1}, true, open(func(s *State) { s.Approvals = 0 }), ActionWait, WaitReview, "0 of 1"},
		{"review beats cannot merge", Policy{Mode: PolicyAuto, RequiredApprovals: 1}, false, open(func(s *State) { s.Approvals = 0 }), ActionWait, WaitReview, "0 of 1"},
		{"review beats unknown mergeability", strict, true, open(func(s *State) { s.Approvals, s.Mergeable = 1, nil }), ActionWait, WaitReview, "1 of 2"},
		// 9. a human merges.
		{"manual policy", manual, true, open(nil), ActionWait, WaitMerge, "waiting for a human to merge ACME-1 into main: the merge policy is manual"},
		{"unset mode counts as manual", Policy{}, true, open(nil), ActionWait, WaitMerge, "the merge policy is manual"},
		{"unknown mode counts as manual", Policy{Mode: "yolo"}, true, open(nil), ActionWait, WaitMerge, "manual"},
		{"forge cannot merge", auto, false, open(nil), ActionWait, WaitMerge, "waiting for a human to merge ACME-1 into main: Ballet cannot merge on this forge"},
		{"plain git", auto, false, State{Branch: "b", Base: "main", BranchPushed: true, Open: true, HeadSHA: "abc", Checks: ChecksNone}, ActionWait, WaitMerge, "cannot merge"},
		{"plain git manual", manual, false, State{Branch: "b", Base: "main", BranchPushed: true, Open: true, HeadSHA: "abc", Checks: ChecksNone}, ActionWait, WaitMerge, "manual"},
		{"manual beats unknown mergeability", manual, true, open(func(s *State) { s.Mergeable = nil }), ActionWait, WaitMerge, "manual"},
		// 10. mergeability unknown.
		{"mergeability unknown", auto, true, open(func(s *State) { s.Mergeable = nil }), ActionWait, WaitChecks, "whether the branch ACME-1 merges cleanly into main"},
		// 11. merge.
		{"merge", auto, true, open(nil), ActionMerge, "", "the branch ACME-1 is ready: merging it into main"},
		{"merge with every requirement", strict, true, open(nil), ActionMerge, "", "ready"},
		{"merge with more approvals than required", strict, true, open(func(s *State) { s.Approvals = 3 }), ActionMerge, "", "ready"},
		{"merge without checks when none are required", auto, true, open(func(s *State) { s.Checks, s.PassedChecks = ChecksNone, nil }), ActionMerge, "", "ready"},
		{"empty check state counts as none", auto, true, open(func(s *State) { s.Checks = "" }), ActionMerge, "", "ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Decide(tt.policy, tt.canMerge, tt.st)
			if d.Action != tt.action || d.Waiting != tt.waiting || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Decide = %+v, want action %q waiting %q reason containing %q", d, tt.action, tt.waiting, tt.reason)
			}
			if (d.Action == ActionWait) != (d.Waiting != "") {
				t.Errorf("Decide = %+v: Waiting must be set exactly when waiting", d)
			}
			if d.Reason == "" {
				t.Errorf("Decide = %+v: no reason", d)
			}
		})
	}
}

// TestDecideLeavesStateAlone: Decide is pure.
func TestDecideLeavesStateAlone(t *testing.T) {
	t.Parallel()
	st := State{Branch: "b", Base: "main", BranchPushed: true, Open: true, Checks: ChecksPending,
		PendingChecks: []string{"a"}, PassedChecks: []string{"b"}}
	p := Policy{Mode: PolicyAuto, RequiredChecks: []string{"c", "c"}}
	d1, d2 := Decide(p, true, st), Decide(p, true, st)
	if d1 != d2 || len(st.PendingChecks) != 1 || len(p.RequiredChecks) != 2 {
		t.Fatalf("Decide changed its input or is not deterministic: %+v %+v %+v", d1, d2, st)
	}
	if d1.Reason != "waiting for checks: a, c" {
		t.Fatalf("reason %q", d1.Reason)
	}
}

func TestLatestReviews(t *testing.T) {
	in := []ReviewView{
		{Reviewer: "ann", State: ReviewCommented},
		{Reviewer: "bob", State: ReviewChangesRequested},
		{Reviewer: "ann", State: ReviewApproved, URL: "a1"},
		{Reviewer: "ann", State: ReviewCommented},
		{Reviewer: "cid", State: ReviewPending},
		{Reviewer: "bob", State: ReviewDismissed, Stale: true},
		{Reviewer: "cid", State: ReviewCommented, URL: "c1"},
	}
	got := LatestReviews(in)
	want := []ReviewView{
		{Reviewer: "ann", State: ReviewApproved, URL: "a1"},
		{Reviewer: "bob", State: ReviewDismissed, Stale: true},
		{Reviewer: "cid", State: ReviewCommented, URL: "c1"},
	}
	if len(got) != len(want) {
		t.Fatalf("LatestReviews = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("LatestReviews[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
