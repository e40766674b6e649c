package gitea

import (
	"context"
	"fmt"
	"strings"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
)

// State reads the pull request, its head's combined status and its reviews.
func (f *Forge) State(ctx context.Context, repo forge.Repo, pr forge.PullRequest) (forge.State, error) {
	base := pr.Base
	if base == "" {
		base = repo.DefaultBranch
	}
	st := forge.State{Branch: pr.Branch, Base: base, Checks: forge.ChecksNone}
	if pr.Number <= 0 {
		return st, fmt.Errorf("gitea: state of %s: no pull request number", pr.Branch)
	}
	t, err := f.target(repo)
	if err != nil {
		return st, err
	}
	p, err := f.pull(ctx, t, pr.Number)
	if err != nil {
		return st, err
	}
	for try := 1; p.State == sdk.StateOpen && !p.Mergeable && try < f.tries; try++ {
		if err := f.sleep(ctx, f.wait); err != nil {
			return st, err
		}
		if p, err = f.pull(ctx, t, pr.Number); err != nil {
			return st, err
		}
	}
	head, err := f.branchHead(ctx, t, pr.Branch)
	if err != nil {
		return st, err
	}
	st.BranchPushed = head != ""
	st.Merged = p.HasMerged
	st.Open = p.State == sdk.StateOpen
	st.Closed = !st.Open && !st.Merged
	if st.HeadSHA, err = f.headOf(ctx, t, p); err != nil {
		return st, err
	}
	if st.Open && st.HeadSHA != "" {
		in, err := f.contained(ctx, t, base, st.HeadSHA)
		if err != nil {
			return st, err
		}
		switch {
		case in: // its head is in the base already: merged (a lost answer, or a push to the base)
			st.Open, st.Merged = false, true
			f.markMerged(ctx, t, pr, p)
		case !st.BranchPushed:
			// The head branch was deleted: Gitea keeps the pull request
			// open with nothing left to merge. Closed without merging, as
			// on the other forges (GitHub closes it).
			st.Open, st.Closed = false, true
		}
	}
	if st.Open {
		switch {
		case p.Draft: // work in progress: Gitea refuses to merge, whatever the content
			st.Mergeable = nil
		case p.Mergeable:
			st.Mergeable = &p.Mergeable
			f.forget(t, p)
		case f.conflictFor(t, p):
			st.Mergeable = &p.Mergeable
		default:
			st.Mergeable = nil // Gitea may still be checking
		}
	}
	if st.HeadSHA != "" {
		if err := f.checks(ctx, t, st.HeadSHA, &st); err != nil {
			return st, err
		}
	}
	if err := f.reviews(ctx, t, pr.Number, &st); err != nil {
		return st, err
	}
	fault.Hit(FaultStateAfter)
	return st, nil
}

// contained reports whether commit head is in branch base (Gitea's compare
// base...head lists no commit).
func (f *Forge) contained(ctx context.Context, t target, base, head string) (bool, error) {
	c, resp, err := f.client(ctx, t).CompareCommits(t.owner, t.name, base, head)
	if err = f.callError(t, fmt.Sprintf("compare %s...%s", base, head), resp, err); err != nil {
		return false, err
	}
	return c.TotalCommits == 0, nil
}

// markMerged records on Gitea that open pull request p, whose head is in
// its base, is merged ("manually merged" at the base's head commit), so
// that it does not stay open on the forge. Best effort: Gitea refuses it
// unless the repository allows the manually-merged style (or marks such
// pull requests itself when "autodetect manual merge" is on), and State
// reports the pull request merged either way.
func (f *Forge) markMerged(ctx context.Context, t target, pr forge.PullRequest, p *sdk.PullRequest) {
	if t.token == "" || p.Base == nil {
		return
	}
	sha, err := f.branchHead(ctx, t, p.Base.Ref)
	if err != nil || sha == "" {
		return
	}
	_, _, _ = f.merge(ctx, t, pr, "manually-merged", sha)
}

// headOf is the head commit of pull request p: the branch's head while it
// is open; once merged or closed, the head it had then (its
// refs/pull/N/head, which Gitea stops moving) — Gitea's single pull request
// answer shows the branch's current head whatever the state.
func (f *Forge) headOf(ctx context.Context, t target, p *sdk.PullRequest) (string, error) {
	if p.State == sdk.StateOpen {
		if p.Head == nil {
			return "", nil
		}
		return p.Head.Sha, nil
	}
	ref := fmt.Sprintf("pull/%d/head", p.Index)
	refs, resp, err := f.client(ctx, t).GetRepoRefs(t.owner, t.name, ref)
	if err = f.callError(t, "read refs/"+ref, resp, err); err != nil {
		return "", err
	}
	for _, r := range refs {
		if r.Ref == "refs/"+ref && r.Object != nil {
			return r.Object.SHA, nil
		}
	}
	return "", fmt.Errorf("gitea: read refs/%s in %s: not in the answer", ref, t.full)
}

// checks reads the combined status of sha: Gitea keeps the latest status
// of each context.
func (f *Forge) checks(ctx context.Context, t target, sha string, st *forge.State) error {
	cs, resp, err := f.client(ctx, t).GetCombinedStatus(t.owner, t.name, sha)
	if err = f.callError(t, "read the statuses of "+sha, resp, err); err != nil {
		return err
	}
	if cs != nil {
		judgeChecks(cs.Statuses, st)
	}
	return nil
}

// judgeChecks sets st's checks from the latest status of each context. A
// commit without statuses has none (Gitea's combined state says pending:
// nothing reported is not pending). success, warning and skipped pass;
// pending runs; failure, error and any state Gitea may add later fail — a
// verdict not understood never merges, and never holds the slot for ever.
func judgeChecks(statuses []*sdk.Status, st *forge.State) {
	st.Checks = forge.ChecksNone
	for _, s := range statuses {
		switch s.State {
		case sdk.StatusSuccess, sdk.StatusWarning, statusSkipped:
			st.PassedChecks = append(st.PassedChecks, s.Context)
		case sdk.StatusPending:
			st.PendingChecks = append(st.PendingChecks, s.Context)
		default: // failure, error, unknown
			st.FailingChecks = append(st.FailingChecks, s.Context)
		}
	}
	switch {
	case len(st.FailingChecks) > 0:
		st.Checks = forge.ChecksFailure
	case len(st.PendingChecks) > 0:
		st.Checks = forge.ChecksPending
	case len(st.PassedChecks) > 0:
		st.Checks = forge.ChecksSuccess
	}
}

// statusSkipped is the state Gitea Actions gives a skipped job's status;
// the SDK has no constant for it.
const statusSkipped sdk.StatusState = "skipped"

// reviews reads every review of pull request n and judges them against
// st.HeadSHA.
func (f *Forge) reviews(ctx context.Context, t target, n int, st *forge.State) error {
	c := f.client(ctx, t)
	var all []*sdk.PullReview
	for page := 1; ; page++ {
		rs, resp, err := c.ListPullReviews(t.owner, t.name, int64(n), sdk.ListPullReviewsOptions{ListOptions: sdk.ListOptions{Page: page, PageSize: 50}})
		if err = f.callError(t, fmt.Sprintf("read the reviews of #%d", n), resp, err); err != nil {
			return err
		}
		all = append(all, rs...)
		if len(rs) < 50 {
			break
		}
	}
	judgeReviews(all, st)
	return nil
}

// judgeReviews: the latest APPROVED or REQUEST_CHANGES review of each
// reviewer decides, and only an official one (a reviewer with write
// access) that is not dismissed. It counts for the current head commit
// only when it reviewed that commit and Gitea does not call it stale: an
// approval given before the latest push approves code without what was
// pushed since (Gitea marks reviews stale some time after a push, so the
// commit is compared too), and a change request of an earlier commit is an
// earlier change request.
func judgeReviews(reviews []*sdk.PullReview, st *forge.State) {
	latest := map[int64]*sdk.PullReview{}
	var order []int64
	for _, r := range reviews {
		if r.Reviewer == nil || (r.State != sdk.ReviewStateApproved && r.State != sdk.ReviewStateRequestChanges) {
			continue
		}
		id := r.Reviewer.ID
		prev, ok := latest[id]
		if !ok {
			order = append(order, id)
		}
		if !ok || r.ID > prev.ID {
			latest[id] = r
		}
	}
	for _, id := range order {
		r := latest[id]
		if !r.Official || r.Dismissed {
			continue
		}
		fresh := !r.Stale && r.CommitID == st.HeadSHA
		switch {
		case r.State == sdk.ReviewStateApproved && fresh:
			st.Approvals++
		case r.State == sdk.ReviewStateRequestChanges:
			words := strings.TrimSpace(r.Body)
			if words == "" {
				words = "(no comment)"
			}
			words = r.Reviewer.UserName + ": " + words
			if !fresh {
				st.EarlierChangeRequests = append(st.EarlierChangeRequests, words)
				continue
			}
			st.ChangesRequested = true
			st.ChangeRequests = append(st.ChangeRequests, words)
		}
	}
}
