package gitea

import (
	"context"
	"fmt"
	"testing"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
)

// TestTheMergeDecisionFromGiteasJSON: Gitea's own JSON for statuses and
// reviews (as Gitea 1.26 sends it, written out here, not built from the
// SDK's types) decides the merge as the policy says: an approval of an
// earlier commit or marked stale does not count, a change request of the
// head fails the stage (one of an earlier commit waits for review), error and failure fail while pending waits, and
// the approvals required are counted. TestPolicy runs the same rules on a
// real Gitea; this holds the wire format, in milliseconds.
func TestTheMergeDecisionFromGiteasJSON(t *testing.T) {
	t.Parallel()
	const earlier = "6666666666666666666666666666666666666666"
	review := func(id int, user, state, commit string, stale bool) string {
		return fmt.Sprintf(`{"id":%d,"user":{"id":%d,"login":%q},"state":%q,"body":"","commit_id":%q,"stale":%v,"official":true,"dismissed":false}`,
			id, id, user, state, commit, stale)
	}
	status := func(state string) string {
		return fmt.Sprintf(`{"state":%q,"total_count":1,"statuses":[{"id":1,"status":%q,"context":"ci/test"}]}`, state, state)
	}
	policy := forge.Policy{Mode: forge.PolicyAuto, RequiredApprovals: 2, RequiredChecks: []string{"ci/test"}}
	for _, c := range []struct {
		name, statuses, reviews string
		action                  string
		waiting                 string
	}{
		{"two fresh approvals, success", status("success"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, false) + "]", forge.ActionMerge, ""},
		{"one approval of an earlier commit", status("success"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", earlier, false) + "]", forge.ActionWait, forge.WaitReview},
		{"one approval marked stale", status("success"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, true) + "]", forge.ActionWait, forge.WaitReview},
		{"one approval only", status("success"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "]", forge.ActionWait, forge.WaitReview},
		{"changes requested on the head", status("success"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, false) + "," + review(3, "cyd", "REQUEST_CHANGES", headSHA, false) + "]", forge.ActionFailed, ""},
		{"changes requested on an earlier commit", status("success"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, false) + "," + review(3, "cyd", "REQUEST_CHANGES", earlier, false) + "]", forge.ActionWait, forge.WaitReview},
		{"status error", status("error"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, false) + "]", forge.ActionFailed, ""},
		{"status failure", status("failure"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, false) + "]", forge.ActionFailed, ""},
		{"status pending", status("pending"),
			"[" + review(1, "ann", "APPROVED", headSHA, false) + "," + review(2, "bob", "APPROVED", headSHA, false) + "]", forge.ActionWait, forge.WaitChecks},
	} {
		g := newFake(t)
		g.scriptOpenPull(true)
		g.on("GET /repos/acme/app/commits/"+headSHA+"/status", 200, c.statuses)
		g.on("GET /repos/acme/app/pulls/7/reviews", 200, c.reviews)
		st, err := g.forge(clock.NewFake(fakeNow)).State(context.Background(), g.repo(), fakePR)
		if err != nil {
			t.Fatalf("%s: State: %v", c.name, err)
		}
		d := forge.Decide(policy, true, st)
		if d.Action != c.action || (c.waiting != "" && d.Waiting != c.waiting) {
			t.Errorf("%s: %+v (state %+v), want %s %s", c.name, d, st, c.action, c.waiting)
		}
	}
}
