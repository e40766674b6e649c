package github

import (
	"context"
	"fmt"
	"slices"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/ballet/ballet/internal/forge"
)

// A ticket's changes on GitHub (changes.Source), all from the REST API:
// the heads from the branches, the commits and files from one compare of
// the two head commits, the pull request with its commit statuses, check
// runs and reviews.
//
// GitHub's compare, asked without paging, lists the newest 250 commits of
// the comparison (oldest first) and at most 300 files; a file's patch is
// left out when GitHub finds it too large (or the file binary), and
// a binary file cannot be told from an empty one: neither has a patch nor
// counts.

// maxCompareFiles is the most files GitHub's compare lists.
const maxCompareFiles = 300

// Heads returns the head commits of branch and of repo.DefaultBranch;
// HeadSHA is "" when the branch does not exist.
func (f *Forge) Heads(ctx context.Context, repo forge.Repo, branch string) (forge.Heads, error) {
	base := repo.DefaultBranch
	if err := checkBranches(branch, base); err != nil {
		return forge.Heads{}, err
	}
	c, err := f.client(repo)
	if err != nil {
		return forge.Heads{}, err
	}
	head, _, err := c.branchHead(ctx, branch)
	if err != nil {
		return forge.Heads{}, err
	}
	baseSHA, ok, err := c.branchHead(ctx, base)
	if err != nil {
		return forge.Heads{}, err
	}
	if !ok {
		return forge.Heads{}, fmt.Errorf("github: the default branch %s does not exist in %s/%s", base, c.owner, c.name)
	}
	return forge.Heads{Branch: branch, Base: base, HeadSHA: head, BaseSHA: baseSHA}, nil
}

// Compare compares h.BaseSHA...h.HeadSHA (one call).
func (f *Forge) Compare(ctx context.Context, repo forge.Repo, branch string, h forge.Heads, lim forge.CompareLimits) (forge.Comparison, error) {
	if !shaRE.MatchString(h.HeadSHA) || !shaRE.MatchString(h.BaseSHA) {
		return forge.Comparison{}, fmt.Errorf("github: compare needs two commit ids, got %q and %q", h.BaseSHA, h.HeadSHA)
	}
	c, err := f.client(repo)
	if err != nil {
		return forge.Comparison{}, err
	}
	cmp, resp, err := c.gh.Repositories.CompareCommits(ctx, c.owner, c.name, h.BaseSHA, h.HeadSHA, nil)
	if err != nil {
		return forge.Comparison{}, c.fail(fmt.Sprintf("comparing %s with %s", branch, h.Base), resp, err)
	}
	return comparison(cmp, lim), nil
}

// comparison turns GitHub's compare into a forge.Comparison within lim
// (pure).
func comparison(cmp *gh.CommitsComparison, lim forge.CompareLimits) forge.Comparison {
	out := forge.Comparison{TotalCommits: cmp.GetAheadBy()}
	for i := len(cmp.Commits) - 1; i >= 0 && (lim.Commits <= 0 || len(out.Commits) < lim.Commits); i-- {
		rc := cmp.Commits[i]
		a := rc.GetCommit().GetAuthor()
		author := a.GetName()
		if a.GetEmail() != "" {
			author += " <" + a.GetEmail() + ">"
		}
		if strings.TrimSpace(author) == "" {
			author = rc.GetAuthor().GetLogin()
		}
		out.Commits = append(out.Commits, forge.Commit{SHA: rc.GetSHA(), Author: author,
			Time: a.GetDate().UTC(), Message: strings.TrimRight(rc.GetCommit().GetMessage(), "\n")})
	}
	out.TotalCommits = max(out.TotalCommits, len(cmp.Commits))
	files := cmp.Files
	out.FilesCut = len(files) >= maxCompareFiles
	if lim.Files > 0 && len(files) > lim.Files {
		files, out.FilesCut = files[:lim.Files], true
	}
	for _, cf := range files {
		fc := forge.FileChange{Path: cf.GetFilename(), Status: fileStatus(cf.GetStatus()),
			Additions: cf.GetAdditions(), Deletions: cf.GetDeletions(), Patch: cf.GetPatch()}
		if fc.Status == forge.FileRenamed || fc.Status == forge.FileCopied {
			fc.PreviousPath = cf.GetPreviousFilename()
		}
		if fc.Patch != "" && !strings.HasSuffix(fc.Patch, "\n") {
			fc.Patch += "\n" // GitHub's patch ends without one; git's does
		}
		// Lines changed but no patch: GitHub left it out (too large).
		fc.PatchCut = cf.Patch == nil && fc.Additions+fc.Deletions > 0
		out.Files = append(out.Files, fc)
	}
	return out
}

// fileStatus maps GitHub's file status to forge.File*.
func fileStatus(s string) string {
	switch s {
	case "added":
		return forge.FileAdded
	case "removed":
		return forge.FileDeleted
	case "renamed":
		return forge.FileRenamed
	case "copied":
		return forge.FileCopied
	case "changed":
		return forge.FileChanged
	}
	return forge.FileModified // modified, unchanged
}

// PullRequest returns the pull request of branch into repo.DefaultBranch
// that Ballet would adopt at head (forge.Adopt: an open one, else one
// merged or closed at head), with its head's statuses, check runs and
// reviews; nil when there is none.
func (f *Forge) PullRequest(ctx context.Context, repo forge.Repo, branch, head string) (*forge.PullView, error) {
	base := repo.DefaultBranch
	if err := checkBranches(branch, base); err != nil {
		return nil, err
	}
	c, err := f.client(repo)
	if err != nil {
		return nil, err
	}
	found, ok, err := c.adopt(ctx, branch, base, head)
	if err != nil || !ok {
		return nil, err
	}
	p, resp, err := c.gh.PullRequests.Get(ctx, c.owner, c.name, found.Number)
	if err != nil {
		return nil, c.fail(fmt.Sprintf("reading pull request #%d", found.Number), resp, err)
	}
	v := &forge.PullView{Number: p.GetNumber(), URL: p.GetHTMLURL(), State: forge.PullOpen, HeadSHA: p.GetHead().GetSHA()}
	switch {
	case p.GetMerged():
		v.State = forge.PullMerged
	case p.GetState() != "open":
		v.State = forge.PullClosed
	default:
		v.Mergeable = mergeable(p)
	}
	if shaRE.MatchString(v.HeadSHA) {
		statuses, runs, err := c.statusesAndRuns(ctx, v.HeadSHA)
		if err != nil {
			return nil, err
		}
		v.Checks = checkViews(statuses, runs)
	}
	reviews, err := c.listReviews(ctx, v.Number)
	if err != nil {
		return nil, err
	}
	v.Reviews = reviewViews(reviews, v.HeadSHA)
	return v, nil
}

// checkViews lists every commit status and check run, by name, in the
// merge policy's words (combineChecks): a status passed, runs or failed
// (error is a failure); a check run runs until completed, then passed
// (success), was neutral (neutral, skipped) or failed (any other
// conclusion).
func checkViews(statuses []*gh.RepoStatus, runs []*gh.CheckRun) []forge.CheckView {
	out := make([]forge.CheckView, 0, len(statuses)+len(runs))
	for _, s := range statuses {
		v := forge.CheckView{Name: s.GetContext(), URL: s.GetTargetURL(), State: forge.CheckFailure}
		switch s.GetState() {
		case "success":
			v.State = forge.CheckSuccess
		case "pending":
			v.State = forge.CheckPending
		}
		out = append(out, v)
	}
	for _, r := range runs {
		v := forge.CheckView{Name: r.GetName(), URL: r.GetDetailsURL(), State: forge.CheckFailure}
		if v.URL == "" {
			v.URL = r.GetHTMLURL()
		}
		switch {
		case r.GetStatus() != "completed":
			v.State = forge.CheckPending
		case r.GetConclusion() == "success":
			v.State = forge.CheckSuccess
		case r.GetConclusion() == "neutral" || r.GetConclusion() == "skipped":
			v.State = forge.CheckNeutral
		}
		out = append(out, v)
	}
	slices.SortStableFunc(out, func(a, b forge.CheckView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// reviewViews is the latest review of each reviewer
// (forge.LatestReviews); stale when dismissed or given on another commit
// than head.
func reviewViews(reviews []*gh.PullRequestReview, head string) []forge.ReviewView {
	var views []forge.ReviewView
	for _, r := range reviews {
		v := forge.ReviewView{Reviewer: r.GetUser().GetLogin(), URL: r.GetHTMLURL(), Time: r.GetSubmittedAt().Time}
		switch r.GetState() {
		case "APPROVED":
			v.State = forge.ReviewApproved
		case "CHANGES_REQUESTED":
			v.State = forge.ReviewChangesRequested
		case "COMMENTED":
			v.State = forge.ReviewCommented
		case "DISMISSED":
			v.State = forge.ReviewDismissed
		case "PENDING":
			v.State = forge.ReviewPending
		default:
			continue // a state GitHub may add later: not shown as a verdict
		}
		v.Stale = v.State != forge.ReviewPending && (v.State == forge.ReviewDismissed || r.GetCommitID() != head)
		views = append(views, v)
	}
	out := forge.LatestReviews(views)
	if out == nil {
		out = []forge.ReviewView{}
	}
	return out
}
