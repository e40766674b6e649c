package gitea

import (
	"slices"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/forge"
)

// The judgement of Gitea's answers, without Gitea: the policy table
// (TestPolicy) runs the same situations on a real Gitea; these rows pin
// each rule down where a mutation run can afford to check it.

func TestJudgeChecksEachState(t *testing.T) {
	for _, c := range []struct {
		state  sdk.StatusState
		checks string
		list   string // which list the context lands in
	}{
		{sdk.StatusSuccess, forge.ChecksSuccess, "passed"},
		{sdk.StatusWarning, forge.ChecksSuccess, "passed"},
		{statusSkipped, forge.ChecksSuccess, "passed"},
		{sdk.StatusPending, forge.ChecksPending, "pending"},
		{sdk.StatusFailure, forge.ChecksFailure, "failing"},
		{sdk.StatusError, forge.ChecksFailure, "failing"}, // not pending: an errored CI never holds the slot
		{"something-new", forge.ChecksFailure, "failing"},
	} {
		var st forge.State
		judgeChecks([]*sdk.Status{{Context: "ci", State: c.state}}, &st)
		lists := map[string][]string{"passed": st.PassedChecks, "pending": st.PendingChecks, "failing": st.FailingChecks}
		for name, l := range lists {
			want := []string(nil)
			if name == c.list {
				want = []string{"ci"}
			}
			if !slices.Equal(l, want) {
				t.Errorf("%s: %s checks %v, want %v", c.state, name, l, want)
			}
		}
		if st.Checks != c.checks {
			t.Errorf("%s: Checks %q, want %q", c.state, st.Checks, c.checks)
		}
	}
}

func TestJudgeChecksCombined(t *testing.T) {
	s := func(ctx string, state sdk.StatusState) *sdk.Status { return &sdk.Status{Context: ctx, State: state} }
	for _, c := range []struct {
		name     string
		statuses []*sdk.Status
		want     string
	}{
		{"none", nil, forge.ChecksNone},
		{"failure beats pending", []*sdk.Status{s("a", sdk.StatusPending), s("b", sdk.StatusFailure), s("c", sdk.StatusSuccess)}, forge.ChecksFailure},
		{"pending beats success", []*sdk.Status{s("a", sdk.StatusSuccess), s("b", sdk.StatusPending)}, forge.ChecksPending},
		{"all passed", []*sdk.Status{s("a", sdk.StatusSuccess), s("b", statusSkipped)}, forge.ChecksSuccess},
	} {
		st := forge.State{Checks: "stale"}
		judgeChecks(c.statuses, &st)
		if st.Checks != c.want {
			t.Errorf("%s: Checks %q, want %q", c.name, st.Checks, c.want)
		}
	}
}

func TestJudgeReviews(t *testing.T) {
	const head, old = "h2", "h1"
	alice := &sdk.User{ID: 1, UserName: "alice"}
	bob := &sdk.User{ID: 2, UserName: "bob"}
	rv := func(id int64, who *sdk.User, state sdk.ReviewStateType, commit, body string) *sdk.PullReview {
		return &sdk.PullReview{ID: id, Reviewer: who, State: state, CommitID: commit, Body: body, Official: true}
	}
	approve := func(id int64, who *sdk.User, commit string) *sdk.PullReview {
		return rv(id, who, sdk.ReviewStateApproved, commit, "ok")
	}
	change := func(id int64, who *sdk.User, commit, body string) *sdk.PullReview {
		return rv(id, who, sdk.ReviewStateRequestChanges, commit, body)
	}
	with := func(r *sdk.PullReview, f func(*sdk.PullReview)) *sdk.PullReview { f(r); return r }
	for _, c := range []struct {
		name      string
		reviews   []*sdk.PullReview
		approvals int
		changes   []string
		earlier   []string
	}{
		{"fresh approval", []*sdk.PullReview{approve(1, alice, head)}, 1, nil, nil},
		{"two reviewers approve", []*sdk.PullReview{approve(1, alice, head), approve(2, bob, head)}, 2, nil, nil},
		{"one reviewer approving twice", []*sdk.PullReview{approve(1, alice, head), approve(2, alice, head)}, 1, nil, nil},
		{"approval of an earlier commit", []*sdk.PullReview{approve(1, alice, old)}, 0, nil, nil},
		{"approval Gitea calls stale", []*sdk.PullReview{with(approve(1, alice, head), func(r *sdk.PullReview) { r.Stale = true })}, 0, nil, nil},
		{"dismissed approval", []*sdk.PullReview{with(approve(1, alice, head), func(r *sdk.PullReview) { r.Dismissed = true })}, 0, nil, nil},
		{"approval without write access", []*sdk.PullReview{with(approve(1, alice, head), func(r *sdk.PullReview) { r.Official = false })}, 0, nil, nil},
		{"a comment is no verdict", []*sdk.PullReview{approve(1, alice, head), rv(2, alice, sdk.ReviewStateComment, head, "hm")}, 1, nil, nil},
		{"a review without a reviewer", []*sdk.PullReview{approve(1, nil, head)}, 0, nil, nil},
		{"changes requested", []*sdk.PullReview{change(1, bob, head, " rename x ")}, 0, []string{"bob: rename x"}, nil},
		{"changes requested without words", []*sdk.PullReview{change(1, bob, head, "")}, 0, []string{"bob: (no comment)"}, nil},
		{"changes requested then approved", []*sdk.PullReview{change(1, alice, head, "no"), approve(2, alice, head)}, 1, nil, nil},
		{"approved then changes requested", []*sdk.PullReview{approve(1, alice, head), change(2, alice, head, "wait")}, 0, []string{"alice: wait"}, nil},
		{"the latest by id decides, whatever the order", []*sdk.PullReview{approve(2, alice, head), change(1, alice, head, "old")}, 1, nil, nil},
		{"changes requested on an earlier commit", []*sdk.PullReview{change(1, alice, old, "rename x")}, 0, nil, []string{"alice: rename x"}},
		{"dismissed change request", []*sdk.PullReview{with(change(1, alice, head, "no"), func(r *sdk.PullReview) { r.Dismissed = true })}, 0, nil, nil},
		{"change request without write access", []*sdk.PullReview{with(change(1, alice, head, "no"), func(r *sdk.PullReview) { r.Official = false })}, 0, nil, nil},
		{"in order of first review", []*sdk.PullReview{change(1, bob, head, "b"), change(2, alice, head, "a")}, 0, []string{"bob: b", "alice: a"}, nil},
	} {
		st := forge.State{HeadSHA: head}
		judgeReviews(c.reviews, &st)
		if st.Approvals != c.approvals || !slices.Equal(st.ChangeRequests, c.changes) ||
			st.ChangesRequested != (len(c.changes) > 0) || !slices.Equal(st.EarlierChangeRequests, c.earlier) {
			t.Errorf("%s: approvals %d, changes %v (%v), earlier %v; want %d, %v, %v",
				c.name, st.Approvals, st.ChangeRequests, st.ChangesRequested, st.EarlierChangeRequests, c.approvals, c.changes, c.earlier)
		}
	}
}
