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
		if in { // its head is in the base already: merged (a lost answer, or a push to the base)
			st.Open, st.Merged = false, true
			f.markMerged(ctx, t, pr, p)
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
	if cs == nil || len(cs.Statuses) == 0 {
		st.Checks = forge.ChecksNone // Gitea may say pending: nothing reported is not pending
		return nil
	}
	for _, s := range cs.Statuses {
		switch s.State {
		case sdk.StatusFailure, sdk.StatusError:
			st.FailingChecks = append(st.FailingChecks, s.Context)
		case sdk.StatusSuccess, sdk.StatusWarning:
			st.PassedChecks = append(st.PassedChecks, s.Context)
		default:
			st.PendingChecks = append(st.PendingChecks, s.Context)
		}
	}
	switch {
	case len(st.FailingChecks) > 0:
		st.Checks = forge.ChecksFailure
	case len(st.PendingChecks) > 0:
		st.Checks = forge.ChecksPending
	default:
		st.Checks = forge.ChecksSuccess
	}
	return nil
}

// reviews: the latest APPROVED or REQUEST_CHANGES review of each reviewer
// decides; only official ones, neither dismissed nor stale, count.
func (f *Forge) reviews(ctx context.Context, t target, n int, st *forge.State) error {
	c := f.client(ctx, t)
	latest := map[int64]*sdk.PullReview{}
	var order []int64
	for page := 1; ; page++ {
		rs, resp, err := c.ListPullReviews(t.owner, t.name, int64(n), sdk.ListPullReviewsOptions{ListOptions: sdk.ListOptions{Page: page, PageSize: 50}})
		if err = f.callError(t, fmt.Sprintf("read the reviews of #%d", n), resp, err); err != nil {
			return err
		}
		for _, r := range rs {
			if r.Reviewer == nil || (r.State != sdk.ReviewStateApproved && r.State != sdk.ReviewStateRequestChanges) {
				continue
			}
			id := r.Reviewer.ID
			if prev, ok := latest[id]; !ok || r.ID > prev.ID {
				if !ok {
					order = append(order, id)
				}
				latest[id] = r
			}
		}
		if len(rs) < 50 {
			break
		}
	}
	for _, id := range order {
		r := latest[id]
		if !r.Official || r.Dismissed || r.Stale {
			continue
		}
		switch r.State {
		case sdk.ReviewStateApproved:
			st.Approvals++
		case sdk.ReviewStateRequestChanges:
			st.ChangesRequested = true
			words := strings.TrimSpace(r.Body)
			if words == "" {
				words = "(no comment)"
			}
			st.ChangeRequests = append(st.ChangeRequests, r.Reviewer.UserName+": "+words)
		}
	}
	return nil
}
