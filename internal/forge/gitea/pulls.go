package gitea

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
)

// EnsurePullRequest finds the pull request of branch into
// repo.DefaultBranch (forge.Adopt) or opens it.
func (f *Forge) EnsurePullRequest(ctx context.Context, repo forge.Repo, branch, title, body string) (forge.PullRequest, error) {
	base := repo.DefaultBranch
	if err := forge.CheckBranch(branch); err != nil || branch == base {
		if err == nil {
			err = fmt.Errorf("%q is the default branch", branch)
		}
		return forge.PullRequest{}, fmt.Errorf("%w: %v", forge.ErrInvalidBranch, err)
	}
	if err := forge.CheckBranch(base); err != nil {
		return forge.PullRequest{}, fmt.Errorf("gitea: the default branch: %w", err)
	}
	t, err := f.target(repo)
	if err != nil {
		return forge.PullRequest{}, err
	}
	head, err := f.branchHead(ctx, t, branch)
	if err != nil {
		return forge.PullRequest{}, err
	}
	if head == "" {
		return forge.PullRequest{}, fmt.Errorf("%w: %s is not in %s", forge.ErrBranchNotPushed, branch, t.full)
	}
	if pr, ok, err := f.find(ctx, t, base, branch, head); err != nil || ok {
		return pr, err
	}
	if err := needToken(t, "open a pull request"); err != nil {
		return forge.PullRequest{}, err
	}
	if strings.TrimSpace(title) == "" {
		title = branch
	}
	fault.Hit(FaultCreateBefore)
	created, resp, err := f.client(ctx, t).CreatePullRequest(t.owner, t.name, sdk.CreatePullRequestOption{
		Head: branch, Base: base, Title: title, Body: body,
	})
	err = f.callError(t, "open a pull request of "+branch, resp, err)
	switch statusOf(err) {
	case 0:
		if err != nil {
			return forge.PullRequest{}, err
		}
		fault.Hit(FaultCreateAfter)
		return toPR(created, branch, base), nil
	case http.StatusConflict: // opened meanwhile (a race): adopt it
		if pr, ok, ferr := f.find(ctx, t, base, branch, head); ferr != nil || ok {
			return pr, ferr
		}
		return forge.PullRequest{}, err
	case http.StatusNotFound: // the head vanished since
		return forge.PullRequest{}, fmt.Errorf("%w: %v", forge.ErrBranchNotPushed, err)
	}
	return forge.PullRequest{}, err
}

// find looks for the pull request of branch into base to adopt.
func (f *Forge) find(ctx context.Context, t target, base, branch, head string) (forge.PullRequest, bool, error) {
	c := f.client(ctx, t)
	one, resp, err := c.GetPullRequestByBaseHead(t.owner, t.name, base, branch)
	err = f.callError(t, "find the pull request of "+branch, resp, err)
	if statusOf(err) == http.StatusNotFound {
		return forge.PullRequest{}, false, nil
	}
	if err != nil {
		return forge.PullRequest{}, false, err
	}
	if one.State == sdk.StateOpen && sameRepo(one) {
		return toPR(one, branch, base), true, nil
	}
	// Not open: other pull requests of the pair may exist (one open, or
	// the merged one of the current head). Gitea cannot filter by head.
	var found []forge.Found
	for page := 1; ; page++ {
		prs, resp, err := c.ListRepoPullRequests(t.owner, t.name, sdk.ListPullRequestsOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: 50}, State: sdk.StateAll,
		})
		if err = f.callError(t, "list the pull requests", resp, err); err != nil {
			return forge.PullRequest{}, false, err
		}
		for _, p := range prs {
			if p.Head == nil || p.Base == nil || p.Head.Ref != branch || p.Base.Ref != base || !sameRepo(p) {
				continue
			}
			fd := forge.Found{PullRequest: toPR(p, branch, base), Open: p.State == sdk.StateOpen, Merged: p.HasMerged, Body: p.Body}
			if p.Created != nil {
				fd.CreatedAt = *p.Created
			}
			found = append(found, fd)
		}
		if len(prs) < 50 {
			break
		}
	}
	fd, ok := forge.Adopt(found, head)
	return fd.PullRequest, ok, nil
}

// sameRepo: the pull request's head is in its base repository (not a fork).
func sameRepo(p *sdk.PullRequest) bool {
	return p.Head == nil || p.Base == nil || p.Head.RepoID == 0 || p.Head.RepoID == p.Base.RepoID
}

func toPR(p *sdk.PullRequest, branch, base string) forge.PullRequest {
	pr := forge.PullRequest{Number: int(p.Index), URL: p.HTMLURL, Branch: branch, Base: base}
	if p.Head != nil {
		pr.HeadSHA = p.Head.Sha
	}
	return pr
}

// Close closes the pull request without merging; a closed or merged one
// stays as it is.
func (f *Forge) Close(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	if pr.Number <= 0 {
		return nil // never opened
	}
	t, err := f.target(repo)
	if err != nil {
		return err
	}
	p, err := f.pull(ctx, t, pr.Number)
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			return nil
		}
		return err
	}
	if p.State != sdk.StateOpen {
		return nil
	}
	call := fmt.Sprintf("close pull request #%d", pr.Number)
	if err := needToken(t, call); err != nil {
		return err
	}
	closed := sdk.StateClosed
	_, resp, err := f.client(ctx, t).EditPullRequest(t.owner, t.name, int64(pr.Number), sdk.EditPullRequestOption{State: &closed})
	return f.callError(t, call, resp, err)
}
