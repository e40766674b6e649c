// Package github is the GitHub forge (github.com and GitHub Enterprise
// Server): forge.Forge through the REST API (version 2022-11-28) with
// github.com/google/go-github.
//
// The repository is its clone URL, https://host/owner/repo[.git]; the API
// base is https://api.github.com for github.com, https://host/api/v3 for any
// other host (GitHub Enterprise), or forge.Repo.APIURL when set. Each call
// resolves the token from repo.CredentialsRef (forge.ResolveCredentials: a
// rotated secret is used from the next call on) and sends it as
// "Authorization: Bearer"; it never appears in an error.
//
// What GitHub reports, and how it becomes a forge.State:
//
//   - mergeable is null while GitHub computes it in the background: nil.
//     mergeable_state "dirty" (a conflict) is false, whatever mergeable says;
//     "unknown" is nil. Every other state (clean, unstable: a non-required
//     check failed; has_hooks; blocked: branch protection wants reviews or
//     checks; behind: protection wants the head up to date with the base;
//     draft) keeps mergeable as GitHub says: none of them is a conflict an
//     agent could fix. Ballet's own policy judges checks and reviews, and a
//     merge that protection still refuses answers 405, which is
//     forge.ErrNotMergeable: the stage waits and reads again.
//   - checks are the combined commit status AND the check runs of the head
//     commit (GitHub Actions reports only as check runs), merged by name, the
//     worst verdict winning. A combined state "pending" with total_count 0
//     means no status at all. A check run passes with conclusion success,
//     neutral or skipped; runs while not completed; fails otherwise (failure,
//     timed_out, cancelled, action_required, startup_failure, stale, and any
//     conclusion GitHub adds later: never merge on a verdict not understood).
//   - reviews: the latest APPROVED or CHANGES_REQUESTED review of each user
//     decides; COMMENTED changes nothing; a DISMISSED review no longer
//     counts. A review counts for the head only when it reviewed that
//     commit (its commit_id): an approval of an earlier commit does not
//     count, a change request of one is an earlier change request (the
//     stage waits for the reviewer instead of failing again). Only reviews whose author_association is OWNER, MEMBER or
//     COLLABORATOR count, approvals and change requests alike (on a public
//     repository anyone may review; GitHub's own required reviews count only
//     those with write access).
//   - BranchPushed: GitHub closes the open pull requests of a deleted head
//     branch, so an open pull request's branch exists; only a closed one
//     costs a branch read.
//
// Rate limits (429; 403 with X-RateLimit-Remaining: 0; a secondary limit:
// 403 with Retry-After or GitHub's "secondary rate limit" message) are a
// *forge.RateLimitedError whose Until comes from forge.RetryAt, or a minute
// from now when GitHub says nothing (its documented advice). 5xx and
// transport errors are returned wrapped, for the job's backoff.
//
// Fault points (internal/fault): github.create_pr.before, .after,
// github.merge.before, .after, github.state.after.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v84/github"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/outbound"
)

// DefaultTimeout bounds one API call when Options.HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// maxPages bounds a paginated read (100 items a page): a server that always
// answers rel="next" cannot loop a poll forever.
const maxPages = 50

// Options configure the GitHub forge.
type Options struct {
	// HTTPClient makes the calls; one with DefaultTimeout when nil.
	// Redirects are never followed.
	HTTPClient *http.Client
	// Secrets resolves credentials references under the platform's
	// policy; nil: none resolves.
	Secrets forge.Secrets
	// Clock turns rate-limit headers into times; clock.Real when nil.
	Clock clock.Clock
}

// Forge is the GitHub forge. Its methods are safe for concurrent use.
type Forge struct {
	http    *http.Client
	secrets forge.Secrets
	clock   clock.Clock
}

// New returns the GitHub forge.
func New(o Options) *Forge {
	f := &Forge{http: outbound.Guard(o.HTTPClient), secrets: forge.OrDenyAll(o.Secrets), clock: o.Clock}
	if o.HTTPClient == nil {
		f.http.Timeout = DefaultTimeout
	}
	if f.clock == nil {
		f.clock = clock.Real{}
	}
	return f
}

var _ forge.Forge = (*Forge)(nil)

// CanMerge is true: Ballet merges on GitHub.
func (f *Forge) CanMerge() bool { return true }

// client is one repository's API, authenticated.
type client struct {
	gh          *gh.Client
	owner, name string
	now         func() time.Time
}

// Locate returns the owner, name and API base of a GitHub repository from
// its clone URL (https://host/owner/repo, with or without .git) and an
// optional API base that overrides the derived one.
func Locate(repoURL, apiURL string) (owner, name string, api *url.URL, err error) {
	if err := forge.CheckLocation(forge.KindGitHub, repoURL); err != nil {
		return "", "", nil, fmt.Errorf("repository.url: %w", err)
	}
	u, _ := url.Parse(repoURL) // checked above
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" || strings.TrimSuffix(parts[1], ".git") == "" {
		return "", "", nil, fmt.Errorf("repository.url: %q must be https://%s/OWNER/REPO", repoURL, u.Host)
	}
	owner, name = parts[0], strings.TrimSuffix(parts[1], ".git")
	if !ownerRE.MatchString(owner) || !nameRE.MatchString(name) {
		return "", "", nil, fmt.Errorf("repository.url: %q does not name a GitHub owner and repository", repoURL)
	}
	switch {
	case apiURL != "":
		api, err = url.Parse(apiURL)
		if err != nil || (api.Scheme != "https" && api.Scheme != "http") || api.Host == "" || api.User != nil {
			return "", "", nil, fmt.Errorf("repository.api_url: %q must be an http(s) URL without credentials", apiURL)
		}
	case strings.EqualFold(u.Hostname(), "github.com"):
		api = &url.URL{Scheme: "https", Host: "api.github.com", Path: "/"}
	default:
		api = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/api/v3/"}
	}
	if !strings.HasSuffix(api.Path, "/") {
		api.Path += "/"
	}
	return owner, name, api, nil
}

var (
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	shaRE   = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
)

func (f *Forge) client(repo forge.Repo) (*client, error) {
	owner, name, api, err := Locate(repo.URL, repo.APIURL)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	_, token, err := forge.ResolveCredentials(repo.Organization, repo.CredentialsRef, f.secrets)
	if err != nil {
		return nil, fmt.Errorf("github: repository.credentials_ref: %w", err)
	}
	hc := *f.http
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Accept", "application/vnd.github+json")
		// The token goes to the API's host only: a transport sees every
		// redirect too, and one to another host must not carry it.
		if r.URL.Scheme == api.Scheme && strings.EqualFold(r.URL.Host, api.Host) {
			r.Header.Set("Authorization", "Bearer "+token)
		} else {
			r.Header.Del("Authorization")
		}
		return next.RoundTrip(r)
	})
	c := gh.NewClient(&hc)
	c.BaseURL = api
	// Ballet turns rate limits into a job's next run time itself, on its own
	// clock: no client-side guessing from the wall clock.
	c.DisableRateLimitCheck = true
	return &client{gh: c, owner: owner, name: name, now: f.clock.Now}, nil
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func checkBranches(branch, base string) error {
	if err := forge.CheckBranch(branch); err != nil {
		return fmt.Errorf("%w: %v", forge.ErrInvalidBranch, err)
	}
	if err := forge.CheckBranch(base); err != nil {
		return fmt.Errorf("%w: the base: %v", forge.ErrInvalidBranch, err)
	}
	return nil
}

// EnsurePullRequest finds the pull request of branch into
// repo.DefaultBranch (forge.Adopt among those GitHub lists for the head and
// base, whatever their state) or opens one. A 422 on create is read: a
// duplicate (another caller opened it meanwhile) is looked up again and
// adopted; a missing head is forge.ErrBranchNotPushed.
func (f *Forge) EnsurePullRequest(ctx context.Context, repo forge.Repo, branch, title, body string) (forge.PullRequest, error) {
	base := repo.DefaultBranch
	if err := checkBranches(branch, base); err != nil {
		return forge.PullRequest{}, err
	}
	c, err := f.client(repo)
	if err != nil {
		return forge.PullRequest{}, err
	}
	head, pushed, err := c.branchHead(ctx, branch)
	if err != nil {
		return forge.PullRequest{}, err
	}
	if !pushed {
		return forge.PullRequest{}, fmt.Errorf("%w: %s is not in %s/%s", forge.ErrBranchNotPushed, branch, c.owner, c.name)
	}
	if pr, ok, err := c.adopt(ctx, branch, base, head); err != nil || ok {
		return pr, err
	}

	fault.Hit("github.create_pr.before")
	created, resp, err := c.gh.PullRequests.Create(ctx, c.owner, c.name, &gh.NewPullRequest{
		Title: gh.Ptr(title), Head: gh.Ptr(c.owner + ":" + branch), Base: gh.Ptr(base), Body: gh.Ptr(body),
	})
	fault.Hit("github.create_pr.after")
	if err == nil {
		return pullRequest(created), nil
	}
	if status(resp, err) != http.StatusUnprocessableEntity {
		return forge.PullRequest{}, c.fail("opening the pull request of "+branch, resp, err)
	}
	switch e := validation(err); {
	case e.duplicate:
		pr, ok, err := c.adopt(ctx, branch, base, head)
		if err != nil || ok {
			return pr, err
		}
		return forge.PullRequest{}, fmt.Errorf("github: opening the pull request of %s: GitHub says one exists for %s:%s, but lists none into %s", branch, c.owner, branch, base)
	case e.head:
		return forge.PullRequest{}, fmt.Errorf("%w: GitHub refused %s as the head of a pull request (deleted meanwhile?)", forge.ErrBranchNotPushed, branch)
	default:
		return forge.PullRequest{}, fmt.Errorf("github: opening the pull request of %s into %s: %s", branch, base, e.message)
	}
}

// adopt lists the pull requests of branch into base (all states, every
// page) and returns the one forge.Adopt chooses.
func (c *client) adopt(ctx context.Context, branch, base, head string) (forge.PullRequest, bool, error) {
	opts := &gh.PullRequestListOptions{State: "all", Head: c.owner + ":" + branch, Base: base, ListOptions: gh.ListOptions{PerPage: 100}}
	var found []forge.Found
	for range maxPages {
		prs, resp, err := c.gh.PullRequests.List(ctx, c.owner, c.name, opts)
		if err != nil {
			return forge.PullRequest{}, false, c.fail("listing the pull requests of "+branch, resp, err)
		}
		for _, p := range prs {
			if p.GetHead().GetRef() != branch || p.GetBase().GetRef() != base {
				continue // the filter is GitHub's; trust only what matches
			}
			found = append(found, forge.Found{
				PullRequest: pullRequest(p),
				Open:        p.GetState() == "open",
				Merged:      p.MergedAt != nil, // a list item has no "merged" field
				Body:        p.GetBody(),
				CreatedAt:   p.GetCreatedAt().Time,
			})
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	f, ok := forge.Adopt(found, head)
	return f.PullRequest, ok, nil
}

func pullRequest(p *gh.PullRequest) forge.PullRequest {
	return forge.PullRequest{
		Number: p.GetNumber(), URL: p.GetHTMLURL(),
		Branch: p.GetHead().GetRef(), Base: p.GetBase().GetRef(), HeadSHA: p.GetHead().GetSHA(),
	}
}

// branchHead returns branch's head commit; pushed is false on 404.
func (c *client) branchHead(ctx context.Context, branch string) (sha string, pushed bool, err error) {
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/branches/%s", c.owner, c.name, url.PathEscape(branch)), nil)
	if err != nil {
		return "", false, fmt.Errorf("github: reading the branch %s: %w", branch, err)
	}
	var b gh.Branch
	resp, err := c.gh.Do(ctx, req, &b)
	switch {
	case status(resp, err) == http.StatusNotFound:
		return "", false, nil
	case err != nil:
		return "", false, c.fail("reading the branch "+branch, resp, err)
	}
	return b.GetCommit().GetSHA(), true, nil
}

// State reads the pull request, and while it is open its checks and
// reviews.
func (f *Forge) State(ctx context.Context, repo forge.Repo, pr forge.PullRequest) (forge.State, error) {
	if pr.Number <= 0 {
		return forge.State{}, fmt.Errorf("github: no pull request number for %s", pr.Branch)
	}
	c, err := f.client(repo)
	if err != nil {
		return forge.State{}, err
	}
	p, resp, err := c.gh.PullRequests.Get(ctx, c.owner, c.name, pr.Number)
	if err != nil {
		return forge.State{}, c.fail(fmt.Sprintf("reading pull request #%d", pr.Number), resp, err)
	}
	st := forge.State{
		Branch: p.GetHead().GetRef(), Base: p.GetBase().GetRef(), HeadSHA: p.GetHead().GetSHA(),
		Open: p.GetState() == "open", Merged: p.GetMerged(),
	}
	st.Closed = !st.Open && !st.Merged
	switch {
	case st.Open:
		st.BranchPushed = true // GitHub closes the pull requests of a deleted head branch
	case st.Closed:
		if _, st.BranchPushed, err = c.branchHead(ctx, st.Branch); err != nil {
			return forge.State{}, err
		}
	}
	if st.Open {
		st.Mergeable = mergeable(p)
		if err := c.checks(ctx, &st); err != nil {
			return forge.State{}, err
		}
		if err := c.reviews(ctx, pr.Number, &st); err != nil {
			return forge.State{}, err
		}
	}
	fault.Hit("github.state.after")
	return st, nil
}

// mergeable maps mergeable and mergeable_state (see the package comment).
func mergeable(p *gh.PullRequest) *bool {
	switch p.GetMergeableState() {
	case "dirty":
		return gh.Ptr(false)
	case "unknown":
		return nil
	}
	return p.Mergeable
}

// checks reads the combined status and the check runs of st.HeadSHA.
func (c *client) checks(ctx context.Context, st *forge.State) error {
	statuses, runs, err := c.statusesAndRuns(ctx, st.HeadSHA)
	if err != nil {
		return err
	}
	st.Checks, st.FailingChecks, st.PendingChecks, st.PassedChecks = combineChecks(statuses, runs)
	return nil
}

// statusesAndRuns reads the latest commit status of each context and the
// check runs of commit sha, every page (bounded).
func (c *client) statusesAndRuns(ctx context.Context, sha string) ([]*gh.RepoStatus, []*gh.CheckRun, error) {
	var statuses []*gh.RepoStatus
	opts := &gh.ListOptions{PerPage: 100}
	for range maxPages {
		cs, resp, err := c.gh.Repositories.GetCombinedStatus(ctx, c.owner, c.name, sha, opts)
		if err != nil {
			return nil, nil, c.fail("reading the commit statuses of "+sha, resp, err)
		}
		statuses = append(statuses, cs.Statuses...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var runs []*gh.CheckRun
	ropts := &gh.ListCheckRunsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for range maxPages {
		res, resp, err := c.gh.Checks.ListCheckRunsForRef(ctx, c.owner, c.name, sha, ropts)
		if err != nil {
			return nil, nil, c.fail("reading the check runs of "+sha, resp, err)
		}
		runs = append(runs, res.CheckRuns...)
		if resp.NextPage == 0 {
			break
		}
		ropts.Page = resp.NextPage
	}
	return statuses, runs, nil
}

// Verdicts of one check, worst last.
const (
	passed = iota
	pending
	failing
)

// combineChecks merges commit statuses and check runs by name, the worst
// verdict of a name winning, into forge.State's fields (names sorted).
func combineChecks(statuses []*gh.RepoStatus, runs []*gh.CheckRun) (checks string, failingNames, pendingNames, passedNames []string) {
	verdict := map[string]int{}
	set := func(name string, v int) {
		if old, ok := verdict[name]; !ok || v > old {
			verdict[name] = v
		}
	}
	for _, s := range statuses {
		switch s.GetState() {
		case "success":
			set(s.GetContext(), passed)
		case "pending":
			set(s.GetContext(), pending)
		default: // failure, error
			set(s.GetContext(), failing)
		}
	}
	for _, r := range runs {
		switch {
		case r.GetStatus() != "completed":
			set(r.GetName(), pending) // queued, in_progress, waiting, requested, pending
		case r.GetConclusion() == "success" || r.GetConclusion() == "neutral" || r.GetConclusion() == "skipped":
			set(r.GetName(), passed)
		default:
			set(r.GetName(), failing)
		}
	}
	for name, v := range verdict {
		switch v {
		case passed:
			passedNames = append(passedNames, name)
		case pending:
			pendingNames = append(pendingNames, name)
		default:
			failingNames = append(failingNames, name)
		}
	}
	slices.Sort(failingNames)
	slices.Sort(pendingNames)
	slices.Sort(passedNames)
	switch {
	case len(verdict) == 0:
		checks = forge.ChecksNone // a combined "pending" with total_count 0 lands here
	case len(failingNames) > 0:
		checks = forge.ChecksFailure
	case len(pendingNames) > 0:
		checks = forge.ChecksPending
	default:
		checks = forge.ChecksSuccess
	}
	return checks, failingNames, pendingNames, passedNames
}

func (c *client) reviews(ctx context.Context, number int, st *forge.State) error {
	all, err := c.listReviews(ctx, number)
	if err != nil {
		return err
	}
	st.Approvals, st.ChangesRequested, st.ChangeRequests, st.EarlierChangeRequests = judgeReviews(all, st.HeadSHA)
	return nil
}

// listReviews reads every review of pull request number, oldest first
// (bounded).
func (c *client) listReviews(ctx context.Context, number int) ([]*gh.PullRequestReview, error) {
	var all []*gh.PullRequestReview
	opts := &gh.ListOptions{PerPage: 100}
	for range maxPages {
		rs, resp, err := c.gh.PullRequests.ListReviews(ctx, c.owner, c.name, number, opts)
		if err != nil {
			return nil, c.fail(fmt.Sprintf("reading the reviews of pull request #%d", number), resp, err)
		}
		all = append(all, rs...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return all, nil
}

// judgeReviews applies "the latest review of each user decides" to reviews
// in GitHub's (chronological) order, for head: an approval counts only
// when it approved head (one of an earlier commit did not see the code
// pushed since), and a change request of an earlier commit is an earlier
// change request.
func judgeReviews(reviews []*gh.PullRequestReview, head string) (approvals int, changesRequested bool, requests, earlier []string) {
	latest := map[string]*gh.PullRequestReview{}
	var order []string
	for _, r := range reviews {
		switch r.GetAuthorAssociation() {
		case "OWNER", "MEMBER", "COLLABORATOR":
		default:
			continue
		}
		user := r.GetUser().GetLogin()
		switch r.GetState() {
		case "APPROVED", "CHANGES_REQUESTED":
			if _, seen := latest[user]; !seen {
				order = append(order, user)
			}
			latest[user] = r
		case "DISMISSED":
			// A dismissed review keeps its place with this state: the
			// user's verdict up to it is gone.
			delete(latest, user)
		}
	}
	for _, user := range order {
		r, ok := latest[user]
		if !ok {
			continue
		}
		fresh := r.GetCommitID() == head
		if r.GetState() == "APPROVED" {
			if fresh {
				approvals++
			}
			continue
		}
		body := strings.TrimSpace(r.GetBody())
		if body == "" {
			body = "(no comment)"
		}
		if !fresh {
			earlier = append(earlier, user+": "+body)
			continue
		}
		changesRequested = true
		requests = append(requests, user+": "+body)
	}
	return approvals, changesRequested, requests, earlier
}

// Merge merges the pull request with a merge commit, guarded by
// pr.HeadSHA: GitHub answers 409 when the head moved (forge.ErrOutOfDate)
// and 405 when it will not merge now (forge.ErrNotMergeable). A 405 or 422
// of a pull request already merged at pr.HeadSHA — Ballet merged, then
// crashed before it recorded it — is success; merged at another head is
// forge.ErrOutOfDate, so that the stage reads the state again.
func (f *Forge) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	if pr.Number <= 0 {
		return fmt.Errorf("github: no pull request number for %s", pr.Branch)
	}
	if !shaRE.MatchString(pr.HeadSHA) {
		return fmt.Errorf("github: merging pull request #%d: %q is not a commit id", pr.Number, pr.HeadSHA)
	}
	c, err := f.client(repo)
	if err != nil {
		return err
	}
	fault.Hit("github.merge.before")
	res, resp, err := c.gh.PullRequests.Merge(ctx, c.owner, c.name, pr.Number, "", &gh.PullRequestOptions{MergeMethod: "merge", SHA: pr.HeadSHA})
	fault.Hit("github.merge.after")
	what := fmt.Sprintf("merging pull request #%d at %s", pr.Number, pr.HeadSHA)
	if err == nil {
		if !res.GetMerged() {
			return fmt.Errorf("%w: %s: GitHub answered %q", forge.ErrNotMergeable, what, res.GetMessage())
		}
		return nil
	}
	switch code := status(resp, err); code {
	case http.StatusConflict:
		return fmt.Errorf("%w: %s: %s", forge.ErrOutOfDate, what, message(err))
	case http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		merged, resp2, err2 := c.gh.PullRequests.IsMerged(ctx, c.owner, c.name, pr.Number)
		if err2 != nil {
			return c.fail(what+": asking whether it was merged", resp2, err2)
		}
		if !merged {
			return fmt.Errorf("%w: %s: GitHub answered %d %s", forge.ErrNotMergeable, what, code, message(err))
		}
		p, resp2, err2 := c.gh.PullRequests.Get(ctx, c.owner, c.name, pr.Number)
		if err2 != nil {
			return c.fail(what+": reading the merged pull request", resp2, err2)
		}
		if p.GetHead().GetSHA() == pr.HeadSHA {
			return nil // already merged at exactly this head
		}
		return fmt.Errorf("%w: %s: it was merged at %s", forge.ErrOutOfDate, what, p.GetHead().GetSHA())
	}
	return c.fail(what, resp, err)
}

// Close closes the pull request without merging; one already closed or
// merged is left as it is.
func (f *Forge) Close(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	if pr.Number <= 0 {
		return nil // never opened: nothing to close
	}
	c, err := f.client(repo)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("closing pull request #%d", pr.Number)
	p, resp, err := c.gh.PullRequests.Get(ctx, c.owner, c.name, pr.Number)
	if err != nil {
		return c.fail(what, resp, err)
	}
	if p.GetState() != "open" {
		return nil
	}
	_, resp, err = c.gh.PullRequests.Edit(ctx, c.owner, c.name, pr.Number, &gh.PullRequest{State: gh.Ptr("closed")})
	if err == nil {
		return nil
	}
	if status(resp, err) == http.StatusUnprocessableEntity {
		// merged or closed meanwhile?
		if p, resp, err2 := c.gh.PullRequests.Get(ctx, c.owner, c.name, pr.Number); err2 == nil && p.GetState() != "open" {
			return nil
		} else if err2 != nil {
			return c.fail(what, resp, err2)
		}
	}
	return c.fail(what, resp, err)
}

// status is the HTTP status of a call's answer, 0 without one (a transport
// error).
func status(resp *gh.Response, err error) int {
	if r := httpResponse(resp, err); r != nil {
		return r.StatusCode
	}
	return 0
}

func httpResponse(resp *gh.Response, err error) *http.Response {
	if resp != nil && resp.Response != nil {
		return resp.Response
	}
	var er *gh.ErrorResponse
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	switch {
	case errors.As(err, &er):
		return er.Response
	case errors.As(err, &rl):
		return rl.Response
	case errors.As(err, &ab):
		return ab.Response
	}
	return nil
}

// fail wraps a failed call's error: a rate limit becomes a
// *forge.RateLimitedError with the time GitHub allows calls again.
func (c *client) fail(what string, resp *gh.Response, err error) error {
	if r := httpResponse(resp, err); r != nil && rateLimited(r, err) {
		until, ok := forge.RetryAt(r.Header, c.now())
		if !ok {
			until = c.now().Add(time.Minute) // GitHub: "wait for at least one minute"
		}
		return fmt.Errorf("github: %s: %w", what, &forge.RateLimitedError{Until: until})
	}
	return fmt.Errorf("github: %s: %w", what, err)
}

// rateLimited tells a rate-limit answer: 429; or 403 with no primary calls
// left, a Retry-After, or GitHub's secondary-limit error.
func rateLimited(r *http.Response, err error) bool {
	var ab *gh.AbuseRateLimitError
	switch {
	case r.StatusCode == http.StatusTooManyRequests:
		return true
	case r.StatusCode != http.StatusForbidden:
		return false
	}
	return r.Header.Get("X-RateLimit-Remaining") == "0" || r.Header.Get("Retry-After") != "" ||
		errors.As(err, &ab) || strings.Contains(strings.ToLower(message(err)), "secondary rate limit")
}

// message is GitHub's message of an error answer.
func message(err error) string {
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		return er.Message
	}
	return err.Error()
}

// refusal is what a 422's errors array says.
type refusal struct {
	duplicate, head bool
	message         string
}

// validation reads a 422 "Validation Failed": a duplicate pull request
// (code custom, "A pull request already exists for …") or an invalid head
// (field head, code invalid: the branch does not exist).
func validation(err error) refusal {
	var er *gh.ErrorResponse
	if !errors.As(err, &er) {
		return refusal{message: err.Error()}
	}
	out := refusal{message: er.Message}
	var msgs []string
	for _, e := range er.Errors {
		switch {
		case strings.Contains(strings.ToLower(e.Message), "already exists"):
			out.duplicate = true
		case e.Field == "head" && e.Code == "invalid":
			out.head = true
		}
		if e.Message != "" {
			msgs = append(msgs, e.Message)
		} else {
			msgs = append(msgs, fmt.Sprintf("%s %s is %s", e.Resource, e.Field, e.Code))
		}
	}
	if len(msgs) > 0 {
		out.message += ": " + strings.Join(msgs, "; ")
	}
	return out
}
