// Package gitea is the Gitea forge (forge.Forge) through the Gitea SDK
// (code.gitea.io/sdk/gitea), measured against Gitea 1.26.
//
// The API base is derived from the repository's clone URL
// (http(s)://host[/subpath]/owner/repo[.git] → host[/subpath]/api/v1), or
// given by forge.Repo.APIURL. The token comes from the repository's
// credentials reference (forge.ResolveCredentials) and is sent only in the
// Authorization header; it is never part of an error. A repository without
// a credentials reference is read anonymously; writes then fail.
//
// Gitea's quirks, handled here:
//   - no head filter on the pull request list: GET /pulls/{base}/{head}
//     answers one pull request of the pair (any state); only when that one
//     is not open is the list read and filtered, for forge.Adopt;
//   - create answers 409 for a duplicate (a race: look again and adopt) and
//     404 for a head that vanished (forge.ErrBranchNotPushed);
//   - mergeable is false while Gitea checks, and its API tells a check from
//     a conflict in no way (both also answer a merge 405 "try again later"):
//     State asks again a few times (Options.MergeableTries), then reports
//     mergeability unknown until the same head and base have been
//     unmergeable for Options.ConflictAfter — only then a conflict. A
//     loaded Gitea re-checks every open pull request after each merge into
//     the base, which took longer than the retries in the failure suite;
//   - a merge whose answer was lost or an error (Gitea answered 500 after
//     the merge commit had landed) leaves the pull request open with its
//     head in the base: State reports an open pull request whose head is
//     contained in the base as merged, so that it is never merged again;
//   - merge: 405 blocked (protection, still checking, conflict), 409 head
//     out of date or conflict, 404 closed; every refusal is judged by
//     reading the pull request again: merged at the decided head is success,
//     a moved head is forge.ErrOutOfDate, anything else
//     forge.ErrNotMergeable;
//   - a commit without statuses is forge.ChecksNone (not pending);
//   - reviews: the latest APPROVED or REQUEST_CHANGES of each reviewer
//     decides; dismissed and stale reviews do not count, nor do reviews
//     that are not official (reviewers without write access, or outside a
//     branch protection's approvers).
//
// Rate limits (429, or 403 with X-RateLimit-Remaining: 0) become
// *forge.RateLimitedError; 5xx answers and timeouts plain wrapped errors.
package gitea

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/outbound"
)

// Fault points (internal/fault) around the writes and after a state read:
// the failure suite kills Core there.
const (
	FaultCreateBefore = "gitea.create_pr.before"
	FaultCreateAfter  = "gitea.create_pr.after"
	FaultMergeBefore  = "gitea.merge.before"
	FaultMergeAfter   = "gitea.merge.after"
	FaultStateAfter   = "gitea.state.after"
)

// DefaultTimeout bounds one API call when Options.HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// Options configure a Forge; every field may be left zero.
type Options struct {
	HTTPClient *http.Client  // nil: a client with DefaultTimeout; redirects are never followed
	Secrets    forge.Secrets // resolves credentials references under the platform's policy; nil: none resolves
	Clock      clock.Clock   // nil: clock.Real
	// MergeableTries is how often State reads a pull request that Gitea
	// calls unmergeable before it believes it (Gitea says false while it
	// checks), MergeableWait the pause between reads. 0: 5 and 300 ms.
	MergeableTries int
	MergeableWait  time.Duration
	// ConflictAfter is how long the same head and base must stay
	// unmergeable before State reports a conflict (mergeable unknown until
	// then). 0: DefaultConflictAfter; < 0: at once.
	ConflictAfter time.Duration
}

// DefaultConflictAfter is Options.ConflictAfter's default: Gitea's check
// of a pull request takes seconds; minutes of "unmergeable" at the same
// heads is a conflict.
const DefaultConflictAfter = 2 * time.Minute

// unmergeable names a pull request at a head and base seen unmergeable.
type unmergeable struct {
	repo       string
	number     int
	head, base string
}

// maxUnmergeable bounds the pull requests State remembers as unmergeable.
const maxUnmergeable = 10000

// Forge is the Gitea forge. Its methods are safe for concurrent use.
type Forge struct {
	hc      *http.Client
	secrets forge.Secrets
	clock   clock.Clock
	tries   int
	wait    time.Duration

	conflictAfter time.Duration
	mu            sync.Mutex
	since         map[unmergeable]time.Time // when each was first seen unmergeable
}

var _ forge.Forge = (*Forge)(nil)

// New returns a Gitea forge.
func New(o Options) *Forge {
	f := &Forge{hc: outbound.Guard(o.HTTPClient), secrets: forge.OrDenyAll(o.Secrets), clock: o.Clock, tries: o.MergeableTries, wait: o.MergeableWait,
		conflictAfter: o.ConflictAfter, since: map[unmergeable]time.Time{}}
	if f.conflictAfter == 0 {
		f.conflictAfter = DefaultConflictAfter
	}
	if o.HTTPClient == nil {
		f.hc.Timeout = DefaultTimeout
	}
	if f.clock == nil {
		f.clock = clock.Real{}
	}
	if f.tries <= 0 {
		f.tries = 5
	}
	if f.wait <= 0 {
		f.wait = 300 * time.Millisecond
	}
	return f
}

// CanMerge is true: Ballet merges on Gitea.
func (f *Forge) CanMerge() bool { return true }

// target is a repository resolved for one call.
type target struct {
	base, owner, name string // API base without /api/v1
	token             string
	full              string // owner/name, for errors
}

// Target parses a repository's location: the API base (without /api/v1),
// owner and name. Exported for the lead's wiring and tests.
func Target(repo forge.Repo) (base, owner, name string, err error) {
	if err := forge.CheckLocation(forge.KindGitea, repo.URL); err != nil {
		return "", "", "", fmt.Errorf("gitea: repository.url: %w", err)
	}
	u, _ := url.Parse(repo.URL)
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", "", "", fmt.Errorf("gitea: repository.url %q must be http(s)://host[/path]/owner/repo", repo.URL)
	}
	owner, name = parts[len(parts)-2], strings.TrimSuffix(parts[len(parts)-1], ".git")
	if name == "" {
		return "", "", "", fmt.Errorf("gitea: repository.url %q names no repository", repo.URL)
	}
	prefix := strings.Join(parts[:len(parts)-2], "/")
	base = u.Scheme + "://" + u.Host
	if prefix != "" {
		base += "/" + prefix
	}
	if repo.APIURL != "" {
		a, err := url.Parse(repo.APIURL)
		if err != nil || (a.Scheme != "http" && a.Scheme != "https") || a.Host == "" || a.User != nil || a.RawQuery != "" || a.Fragment != "" {
			return "", "", "", fmt.Errorf("gitea: repository.api_url %q must be an http(s) URL without credentials, such as https://host/api/v1", repo.APIURL)
		}
		p := strings.TrimSuffix(a.Path, "/")
		if !strings.HasSuffix(p, "/api/v1") {
			return "", "", "", fmt.Errorf("gitea: repository.api_url %q must end with /api/v1", repo.APIURL)
		}
		base = a.Scheme + "://" + a.Host + strings.TrimSuffix(p, "/api/v1")
	}
	return base, owner, name, nil
}

func (f *Forge) target(repo forge.Repo) (target, error) {
	base, owner, name, err := Target(repo)
	if err != nil {
		return target{}, err
	}
	t := target{base: base, owner: owner, name: name, full: owner + "/" + name}
	if repo.CredentialsRef != "" {
		_, tok, err := forge.ResolveCredentials(repo.CredentialsRef, f.secrets)
		if err != nil {
			return target{}, fmt.Errorf("gitea: %s: %w", t.full, err)
		}
		t.token = tok
	}
	return t, nil
}

// client is an SDK client for one call: the SDK keeps the context per
// client.
func (f *Forge) client(ctx context.Context, t target) *sdk.Client {
	opts := []sdk.ClientOption{sdk.SetHTTPClient(f.hc), sdk.SetContext(ctx), sdk.SetGiteaVersion(""), sdk.SetUserAgent("ballet")}
	if t.token != "" {
		opts = append(opts, sdk.SetToken(t.token))
	}
	c, _ := sdk.NewClient(t.base, opts...) // with SetGiteaVersion("") it asks nothing and cannot fail
	return c
}

// needToken refuses a write without credentials.
func needToken(t target, call string) error {
	if t.token == "" {
		return fmt.Errorf("gitea: %s in %s: the repository has no credentials_ref: Ballet needs a token with write access to the repository", call, t.full)
	}
	return nil
}

// callError wraps the outcome of one API call: nil on success, a
// *forge.RateLimitedError for a rate limit, else an error naming the call
// and the repository.
func (f *Forge) callError(t target, call string, resp *sdk.Response, err error) error {
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
		if rl := forge.RateLimit(status, resp.Header, f.clock.Now()); rl != nil {
			return fmt.Errorf("gitea: %s in %s: %w", call, t.full, rl)
		}
	}
	if err == nil && (status == 0 || status/100 == 2) {
		return nil
	}
	if err == nil {
		err = errors.New(http.StatusText(status))
	}
	if status != 0 {
		return &apiError{call: call, repo: t.full, status: status, err: redact(err, t.token)}
	}
	return fmt.Errorf("gitea: %s in %s: %w", call, t.full, redact(err, t.token))
}

// redact keeps the token out of an error whatever a server or proxy echoed.
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return redacted{msg: strings.ReplaceAll(err.Error(), token, "xxxxx"), err: err}
}

// redacted is an error whose message has the token removed; errors.Is and
// errors.As still see the original.
type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

// apiError is an answer of Gitea other than 2xx.
type apiError struct {
	call, repo string
	status     int
	err        error
}

func (e *apiError) Error() string {
	return fmt.Sprintf("gitea: %s in %s: HTTP %d: %s", e.call, e.repo, e.status, oneLine(e.err.Error()))
}

func (e *apiError) Unwrap() error { return e.err }

// statusOf is the HTTP status of an apiError, else 0.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// branchHead returns the head commit of branch, "" when it does not exist.
func (f *Forge) branchHead(ctx context.Context, t target, branch string) (string, error) {
	b, resp, err := f.client(ctx, t).GetRepoBranch(t.owner, t.name, branch)
	if err = f.callError(t, "read branch "+branch, resp, err); err != nil {
		if statusOf(err) == http.StatusNotFound {
			return "", nil
		}
		return "", err
	}
	if b == nil || b.Commit == nil || b.Commit.ID == "" {
		return "", fmt.Errorf("gitea: read branch %s in %s: no head commit in the answer", branch, t.full)
	}
	return b.Commit.ID, nil
}

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

// key is p's entry among the unmergeable ones.
func key(t target, p *sdk.PullRequest) unmergeable {
	k := unmergeable{repo: t.base + "/" + t.full, number: int(p.Index)}
	if p.Head != nil {
		k.head = p.Head.Sha
	}
	if p.Base != nil {
		k.base = p.Base.Sha
	}
	return k
}

// conflictFor records that p is unmergeable at its head and base, and
// reports whether it has been so for ConflictAfter.
func (f *Forge) conflictFor(t target, p *sdk.PullRequest) bool {
	if f.conflictAfter < 0 {
		return true
	}
	now := f.clock.Now()
	k := key(t, p)
	f.mu.Lock()
	defer f.mu.Unlock()
	first, ok := f.since[k]
	if !ok {
		if len(f.since) >= maxUnmergeable {
			for old, at := range f.since {
				if now.Sub(at) > 24*time.Hour || len(f.since) >= maxUnmergeable {
					delete(f.since, old)
				}
			}
		}
		f.since[k], first = now, now
	}
	return now.Sub(first) >= f.conflictAfter
}

// forget drops p's unmergeable record: it merges.
func (f *Forge) forget(t target, p *sdk.PullRequest) {
	f.mu.Lock()
	delete(f.since, key(t, p))
	f.mu.Unlock()
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

func (f *Forge) sleep(ctx context.Context, d time.Duration) error {
	tm := f.clock.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C():
		return nil
	}
}

func (f *Forge) pull(ctx context.Context, t target, n int) (*sdk.PullRequest, error) {
	p, resp, err := f.client(ctx, t).GetPullRequest(t.owner, t.name, int64(n))
	if err = f.callError(t, fmt.Sprintf("read pull request #%d", n), resp, err); err != nil {
		return nil, err
	}
	return p, nil
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

// Merge merges the pull request at pr.HeadSHA with a merge commit.
func (f *Forge) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	if pr.Number <= 0 || pr.HeadSHA == "" {
		return fmt.Errorf("gitea: merge %s: the pull request's number and decided head commit are needed", pr.Branch)
	}
	t, err := f.target(repo)
	if err != nil {
		return err
	}
	call := fmt.Sprintf("merge pull request #%d", pr.Number)
	if err := needToken(t, call); err != nil {
		return err
	}
	fault.Hit(FaultMergeBefore)
	// The merge is not cut short by the caller's deadline: Gitea pushes the
	// merge commit to the base and then records the pull request merged,
	// and a request cancelled between the two leaves the commit on the base
	// and the pull request open. The HTTP client's timeout still bounds it.
	status, msg, err := f.merge(context.WithoutCancel(ctx), t, pr, "merge", pr.HeadSHA)
	if err != nil {
		return fmt.Errorf("gitea: %s in %s: %w", call, t.full, redact(err, t.token))
	}
	if status/100 == 2 {
		fault.Hit(FaultMergeAfter)
		return nil
	}
	err = &apiError{call: call, repo: t.full, status: status, err: redact(errors.New(msg), t.token)}
	if status != http.StatusMethodNotAllowed && status != http.StatusConflict && status != http.StatusNotFound {
		return err
	}
	// Refused: the pull request as it is now tells why.
	p, perr := f.pull(ctx, t, pr.Number)
	if perr != nil {
		return fmt.Errorf("%w (then: %v)", err, perr)
	}
	head, herr := f.headOf(ctx, t, p)
	if herr != nil {
		return fmt.Errorf("%w (then: %v)", err, herr)
	}
	switch {
	case p.HasMerged && head == pr.HeadSHA:
		return nil // merged before (by Ballet before a crash, or a person): done
	case p.HasMerged:
		return fmt.Errorf("%w: #%d was merged at %s, not at %s", forge.ErrOutOfDate, pr.Number, head, pr.HeadSHA)
	case p.State != sdk.StateOpen:
		return fmt.Errorf("%w: #%d is closed", forge.ErrNotMergeable, pr.Number)
	case head != pr.HeadSHA:
		return fmt.Errorf("%w: %s is at %s, not at %s: %v", forge.ErrOutOfDate, pr.Branch, head, pr.HeadSHA, err)
	}
	return fmt.Errorf("%w: %v", forge.ErrNotMergeable, err)
}

// merge sends the merge request itself: the SDK drops Gitea's answer, whose
// message says why a merge was refused. It returns the HTTP status and
// Gitea's message; err is a transport error or a rate limit.
func (f *Forge) merge(ctx context.Context, t target, pr forge.PullRequest, do, commit string) (int, string, error) {
	fields := map[string]string{"Do": do, "head_commit_id": commit}
	if do == "manually-merged" {
		fields = map[string]string{"Do": do, "merge_commit_id": commit}
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return 0, "", err
	}
	u := fmt.Sprintf("%s/api/v1/repos/%s/%s/pulls/%d/merge", t.base, url.PathEscape(t.owner), url.PathEscape(t.name), pr.Number)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "token "+t.token)
	resp, err := f.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if rl := forge.RateLimit(resp.StatusCode, resp.Header, f.clock.Now()); rl != nil {
		return 0, "", rl
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	msg := http.StatusText(resp.StatusCode)
	if json.Unmarshal(b, &m) == nil && m.Message != "" {
		msg = m.Message
	} else if s := strings.TrimSpace(string(b)); s != "" {
		msg = oneLine(s)
	}
	return resp.StatusCode, msg, nil
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
