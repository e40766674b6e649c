package gitea

import (
	"context"
	"errors"
	"fmt"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/gitexec"
)

// A ticket's changes on Gitea (changes.Source). The heads, the pull
// request, its statuses and reviews come from the API. The commits and
// the files with their patches come from git: Gitea 1.26's compare API
// lists commits without any file or patch, and its only diffs are of one
// commit or of a pull request — none of a branch that has no pull request
// yet, which is what a person approves before the merge stage opens one.
// So the branch and its base are fetched over HTTP with the repository's
// token into a bare mirror (Options.GitCache, through package gitforge:
// the same reading as on plain git).

// maxReviewPages bounds the reviews read for a pull request (50 a page).
const maxReviewPages = 20

// Heads returns the head commits of branch and of repo.DefaultBranch;
// HeadSHA is "" when the branch does not exist.
func (f *Forge) Heads(ctx context.Context, repo forge.Repo, branch string) (forge.Heads, error) {
	base := repo.DefaultBranch
	if err := checkPair(branch, base); err != nil {
		return forge.Heads{}, err
	}
	t, err := f.target(repo)
	if err != nil {
		return forge.Heads{}, err
	}
	head, err := f.branchHead(ctx, t, branch)
	if err != nil {
		return forge.Heads{}, err
	}
	baseSHA, err := f.branchHead(ctx, t, base)
	if err != nil {
		return forge.Heads{}, err
	}
	if baseSHA == "" {
		return forge.Heads{}, fmt.Errorf("gitea: the default branch %s does not exist in %s", base, t.full)
	}
	return forge.Heads{Branch: branch, Base: base, HeadSHA: head, BaseSHA: baseSHA}, nil
}

// Compare reads the commits and the changed files of the branch with git,
// fetching from the repository's clone URL with its token.
func (f *Forge) Compare(ctx context.Context, repo forge.Repo, branch string, h forge.Heads, lim forge.CompareLimits) (forge.Comparison, error) {
	if f.git == nil {
		return forge.Comparison{}, errors.New("gitea: comparing a branch needs a git cache directory (Options.GitCache)")
	}
	t, err := f.target(repo)
	if err != nil {
		return forge.Comparison{}, err
	}
	auth := ""
	if t.token != "" {
		auth = "token " + t.token
	}
	cmp, err := f.git.CompareAuth(ctx, repo, branch, h, lim, auth)
	var ge *gitexec.Error
	switch {
	case err == nil:
		return cmp, nil
	case errors.As(err, &ge) && ge.Stderr != "":
		// What git said is the news; its command line (the cache's path)
		// is not for the API's answer.
		return forge.Comparison{}, fmt.Errorf("gitea: compare %s with %s in %s: git: %w", branch, h.Base, t.full,
			redact(errors.New(ge.Stderr), t.token))
	}
	return forge.Comparison{}, fmt.Errorf("gitea: compare %s with %s in %s: %w", branch, h.Base, t.full, redact(err, t.token))
}

// PullRequest returns the pull request of branch into repo.DefaultBranch
// that Ballet would adopt at head (forge.Adopt: an open one, else one
// merged or closed at head), with its head's statuses and its reviews;
// nil when there is none.
func (f *Forge) PullRequest(ctx context.Context, repo forge.Repo, branch, head string) (*forge.PullView, error) {
	base := repo.DefaultBranch
	if err := checkPair(branch, base); err != nil {
		return nil, err
	}
	t, err := f.target(repo)
	if err != nil {
		return nil, err
	}
	found, ok, err := f.find(ctx, t, base, branch, head)
	if err != nil || !ok {
		return nil, err
	}
	p, err := f.pull(ctx, t, found.Number)
	if err != nil {
		return nil, err
	}
	v := &forge.PullView{Number: int(p.Index), URL: p.HTMLURL, State: forge.PullOpen}
	switch {
	case p.HasMerged:
		v.State = forge.PullMerged
	case p.State != sdk.StateOpen:
		v.State = forge.PullClosed
	}
	if v.HeadSHA, err = f.headOf(ctx, t, p); err != nil {
		return nil, err
	}
	if v.State == forge.PullOpen && !p.Draft {
		// Gitea says false while it checks: false only once it stayed so
		// (the same judgement as State).
		if p.Mergeable || f.conflictFor(t, p) {
			v.Mergeable = &p.Mergeable
		}
	}
	if v.HeadSHA != "" {
		cs, resp, err := f.client(ctx, t).GetCombinedStatus(t.owner, t.name, v.HeadSHA)
		if err = f.callError(t, "read the statuses of "+v.HeadSHA, resp, err); err != nil {
			return nil, err
		}
		if cs != nil {
			v.Checks = checkViews(cs.Statuses)
		}
	}
	var all []*sdk.PullReview
	c := f.client(ctx, t)
	for page := 1; page <= maxReviewPages; page++ {
		rs, resp, err := c.ListPullReviews(t.owner, t.name, p.Index, sdk.ListPullReviewsOptions{ListOptions: sdk.ListOptions{Page: page, PageSize: 50}})
		if err = f.callError(t, fmt.Sprintf("read the reviews of #%d", p.Index), resp, err); err != nil {
			return nil, err
		}
		all = append(all, rs...)
		if len(rs) < 50 {
			break
		}
	}
	v.Reviews = reviewViews(all, v.HeadSHA)
	return v, nil
}

// checkPair refuses names that cannot be branches before they reach a URL.
func checkPair(branch, base string) error {
	if err := forge.CheckBranch(branch); err != nil {
		return fmt.Errorf("%w: %v", forge.ErrInvalidBranch, err)
	}
	if err := forge.CheckBranch(base); err != nil {
		return fmt.Errorf("gitea: the default branch: %w", err)
	}
	return nil
}

// checkViews turns the latest status of each context into checks, in the
// merge policy's words (judgeChecks): success and warning passed, skipped
// is neutral, pending runs, anything else failed.
func checkViews(statuses []*sdk.Status) []forge.CheckView {
	out := make([]forge.CheckView, 0, len(statuses))
	for _, s := range statuses {
		c := forge.CheckView{Name: s.Context, URL: s.TargetURL, State: forge.CheckFailure}
		switch s.State {
		case sdk.StatusSuccess, sdk.StatusWarning:
			c.State = forge.CheckSuccess
		case statusSkipped:
			c.State = forge.CheckNeutral
		case sdk.StatusPending:
			c.State = forge.CheckPending
		}
		out = append(out, c)
	}
	return out
}

// reviewViews is the latest review of each reviewer (forge.LatestReviews).
// A review is stale when Gitea says so, when it was dismissed, or when it
// reviewed another commit than head (Gitea marks stale a moment after a
// push, not at once). A requested review not given yet is pending.
func reviewViews(reviews []*sdk.PullReview, head string) []forge.ReviewView {
	var views []forge.ReviewView
	for _, r := range reviews {
		who := ""
		switch {
		case r.Reviewer != nil:
			who = r.Reviewer.UserName
		case r.ReviewerTeam != nil:
			who = r.ReviewerTeam.Name
		default:
			continue
		}
		v := forge.ReviewView{Reviewer: who, URL: r.HTMLURL, Time: r.Submitted}
		switch r.State {
		case sdk.ReviewStateApproved:
			v.State = forge.ReviewApproved
		case sdk.ReviewStateRequestChanges:
			v.State = forge.ReviewChangesRequested
		case sdk.ReviewStateComment:
			v.State = forge.ReviewCommented
		case sdk.ReviewStatePending, sdk.ReviewStateRequestReview:
			v.State = forge.ReviewPending
		default:
			continue // a state Gitea may add later: not shown as a verdict
		}
		if r.Dismissed {
			v.State = forge.ReviewDismissed
		}
		v.Stale = v.State != forge.ReviewPending && (r.Stale || r.Dismissed || r.CommitID != head)
		views = append(views, v)
	}
	out := forge.LatestReviews(views)
	if out == nil {
		out = []forge.ReviewView{}
	}
	return out
}
