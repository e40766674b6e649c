package forge

import (
	"fmt"
	"slices"
	"strings"
)

// Policy is a project's merge policy (ADR-0008). Its fields match
// tenancy.MergePolicy, so a conversion forge.Policy(p.MergePolicy) works.
type Policy struct {
	Mode              string // PolicyAuto or PolicyManual; anything else counts as manual
	RequiredApprovals int
	RequiredChecks    []string // check names that must have passed
}

// Policy modes.
const (
	PolicyAuto   = "auto"   // Ballet merges once checks and reviews allow
	PolicyManual = "manual" // a human merges
)

// Decision actions and what a waiting stage waits for.
const (
	ActionWait   = "wait"   // poll again later
	ActionMerge  = "merge"  // call Forge.Merge now
	ActionDone   = "done"   // the stage ends done
	ActionFailed = "failed" // the stage ends failed, with Reason as its report

	WaitChecks = "checks" // checks run, or the forge computes mergeability: the flow keeps its slot
	WaitReview = "review" // a human reviews: the flow frees its slot
	WaitMerge  = "merge"  // a human merges: the flow frees its slot
)

// Decision is the merge stage's next step.
type Decision struct {
	Action  string // ActionWait, ActionMerge, ActionDone or ActionFailed
	Waiting string // WaitChecks, WaitReview or WaitMerge when Action is ActionWait
	Reason  string // a human sentence saying why, for the stage report
}

// Decide judges a pull request's state under a policy. canMerge is
// Forge.CanMerge. The first rule that applies wins:
//
//  1. merged → done
//  2. closed without merging → failed (branch gone: "deleted without being merged")
//  3. branch not pushed → failed "the branch X was never pushed"
//  4. a failing check (any, required or not) → failed, naming the checks
//  5. changes requested → failed, quoting the reviews
//  6. mergeable is false (a definite conflict) → failed "the branch X conflicts with Y"
//  7. checks pending, or a required check not passed yet → wait checks
//  8. fewer approvals than required, or changes requested on an earlier
//     head commit that their reviewer has not reviewed again → wait review
//  9. policy not auto, or the forge cannot merge → wait merge (a human merges)
//  10. mergeability unknown → wait checks (the forge is computing it)
//  11. otherwise → merge
//
// Definite failures come before every wait, so a stage never holds a slot
// waiting for checks when a review or a conflict has already sent it back.
// Mergeability matters only when Ballet merges: a human merging resolves or
// reports conflicts himself, and plain git never knows it.
func Decide(policy Policy, canMerge bool, st State) Decision {
	branch, base := "the branch", "the default branch"
	if st.Branch != "" {
		branch = "the branch " + st.Branch
	}
	if st.Base != "" {
		base = st.Base
	}
	failed := func(format string, a ...any) Decision {
		return Decision{Action: ActionFailed, Reason: fmt.Sprintf(format, a...)}
	}
	wait := func(what, format string, a ...any) Decision {
		return Decision{Action: ActionWait, Waiting: what, Reason: fmt.Sprintf(format, a...)}
	}

	switch {
	case st.Merged:
		return Decision{Action: ActionDone, Reason: fmt.Sprintf("%s was merged into %s", branch, base)}
	case st.Closed && !st.BranchPushed:
		return failed("%s was deleted without being merged into %s", branch, base)
	case st.Closed:
		return failed("the pull request was closed without merging")
	case !st.BranchPushed:
		return failed("%s was never pushed", branch)
	case st.Checks == ChecksFailure || len(st.FailingChecks) > 0:
		if len(st.FailingChecks) == 0 {
			return failed("the checks failed")
		}
		return failed("checks failed: %s", strings.Join(st.FailingChecks, ", "))
	case st.ChangesRequested:
		if len(st.ChangeRequests) == 0 {
			return failed("changes were requested in a review")
		}
		return failed("changes were requested: %s", strings.Join(st.ChangeRequests, "; "))
	case st.Mergeable != nil && !*st.Mergeable:
		return failed("%s conflicts with %s", branch, base)
	}

	var missing []string // required checks that have not passed yet
	for _, c := range policy.RequiredChecks {
		if !slices.Contains(st.PassedChecks, c) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	known := st.Checks == "" || st.Checks == ChecksNone || st.Checks == ChecksSuccess
	switch {
	case st.Checks == ChecksPending || len(missing) > 0 || len(st.PendingChecks) > 0:
		var names []string
		names = append(names, st.PendingChecks...)
		for _, c := range missing {
			if !slices.Contains(names, c) {
				names = append(names, c)
			}
		}
		if len(names) == 0 {
			return wait(WaitChecks, "waiting for the checks to finish")
		}
		return wait(WaitChecks, "waiting for checks: %s", strings.Join(names, ", "))
	case !known:
		return wait(WaitChecks, "waiting for the checks: the forge reported the unknown state %q", st.Checks)
	case st.Approvals < policy.RequiredApprovals:
		return wait(WaitReview, "waiting for review: %d of %d required approvals", max(st.Approvals, 0), policy.RequiredApprovals)
	case len(st.EarlierChangeRequests) > 0:
		return wait(WaitReview, "waiting for review: changes were requested on an earlier commit: %s", strings.Join(st.EarlierChangeRequests, "; "))
	case policy.Mode != PolicyAuto:
		return wait(WaitMerge, "waiting for a human to merge %s into %s: the merge policy is manual", strings.TrimPrefix(branch, "the branch "), base)
	case !canMerge:
		return wait(WaitMerge, "waiting for a human to merge %s into %s: Ballet cannot merge on this forge", strings.TrimPrefix(branch, "the branch "), base)
	case st.Mergeable == nil:
		return wait(WaitChecks, "waiting for the forge to find out whether %s merges cleanly into %s", branch, base)
	}
	return Decision{Action: ActionMerge, Reason: fmt.Sprintf("%s is ready: merging it into %s", branch, base)}
}
