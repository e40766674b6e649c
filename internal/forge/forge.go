// Package forge is what the platform merge stage needs from a forge (plain
// git, Gitea, GitHub): find or open the pull request of a ticket's branch,
// read its state, and merge it. It also holds Decide, the pure function that
// turns a merge policy and a forge's state into the stage's next step, so
// that the flow engine only reads (State), decides (Decide) and acts (Merge
// or wait).
//
// The interface is declared here, not in the flow engine, so that each forge
// (internal/forge/gitforge, later gitea and github) implements it without
// importing the engine. This package is pure: no storage, no HTTP.
//
// A forge reports what it knows and leaves judgement to Decide. The forges
// differ (see the State fields): GitHub's mergeable is null while it
// computes, Gitea's is false while it checks; plain git has no pull
// requests, no checks and no reviews, and cannot merge at all — a human
// merges, and the stage waits until the branch's head commit is contained in
// the default branch.
package forge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Repo is where a project's code lives, as the forge needs it.
type Repo struct {
	// URL is a path or URL (plain git), or the repository's clone URL
	// (Gitea, GitHub: http(s)://host/owner/repo, with or without .git).
	URL           string
	DefaultBranch string // the base of every pull request
	// APIURL overrides the API base a client derives from URL (GitHub:
	// https://api.github.com, or https://host/api/v3 on GitHub Enterprise;
	// Gitea: http(s)://host/api/v1). Empty: derived.
	APIURL string
	// CredentialsRef names the secret to authenticate with; never the secret.
	// Plain git ignores it and uses git's own credentials (ssh agent,
	// credential helper).
	CredentialsRef string
	// Organization is the slug of the organization the repository's
	// project belongs to: CredentialsRef resolves for it alone.
	Organization string
}

// PullRequest identifies the pull request of a ticket's branch. The flow
// engine keeps it between polls: plain git has no pull requests, so there it
// is only Branch, Base and the HeadSHA seen when it was ensured — which is
// what still proves a merge after the branch was deleted.
type PullRequest struct {
	Number  int    `json:"number"`   // 0 on plain git
	URL     string `json:"url"`      // the pull request's web page; "" on plain git
	Branch  string `json:"branch"`   // the head branch
	Base    string `json:"base"`     // the branch it merges into
	HeadSHA string `json:"head_sha"` // the head commit as last seen; Merge merges exactly this commit
}

// Check states of State.Checks.
const (
	ChecksNone    = "none"    // no check reported (plain git always)
	ChecksPending = "pending" // some check still runs
	ChecksSuccess = "success" // every reported check passed
	ChecksFailure = "failure" // some check failed
)

// State is a pull request as the forge sees it now.
type State struct {
	Branch, Base string // copied from the PullRequest, for reports
	// BranchPushed: the head branch exists on the forge.
	BranchPushed bool
	// Open, Merged, Closed: Closed means closed without merging (on plain
	// git: the branch was deleted and its last known head is not in Base).
	Open, Merged, Closed bool
	HeadSHA              string // the current head commit (the recorded one once the branch is gone)
	// Checks is ChecksNone, ChecksPending, ChecksSuccess or ChecksFailure,
	// combining every status and check run of HeadSHA.
	Checks        string
	FailingChecks []string // names of checks that failed or errored
	// FailingCheckURLs, optional, is the page of a failing check by name
	// (a status's target URL, a check run's details), for the report.
	FailingCheckURLs map[string]string
	PendingChecks    []string // names of checks still running
	PassedChecks     []string // names of checks that succeeded: a required check in none of the three lists has not reported yet
	// Approvals counts current approvals: the latest review of each
	// reviewer with write access decides; a dismissed review does not
	// count, nor does one of an earlier head commit (stale: it did not see
	// the code pushed since).
	Approvals int
	// ChangesRequested: some reviewer's latest review requests changes on
	// the current head commit.
	ChangesRequested bool
	ChangeRequests   []string // those reviews as "reviewer: text", for the stage report
	// EarlierChangeRequests are the latest reviews that requested changes
	// on an earlier head commit ("reviewer: text"): the work pushed since
	// may answer them, but only the reviewer (or a dismissal) says so.
	EarlierChangeRequests []string
	// Mergeable is nil while unknown or being computed, false only for a
	// definite conflict. A forge that answers false while it checks (Gitea)
	// must report nil until it is sure.
	Mergeable *bool
}

// Forge is a code host the merge stage talks to.
type Forge interface {
	// EnsurePullRequest finds or opens the pull request of branch into
	// repo.DefaultBranch: an existing one (open, merged or closed) is
	// returned as it is. ErrBranchNotPushed when the branch does not exist,
	// ErrInvalidBranch when it cannot name a branch.
	EnsurePullRequest(ctx context.Context, repo Repo, branch, title, body string) (PullRequest, error)
	// State reads the pull request's current state.
	State(ctx context.Context, repo Repo, pr PullRequest) (State, error)
	// Merge merges the pull request at pr.HeadSHA (pass the HeadSHA of the
	// State that Decide judged). ErrNotMergeable when the forge refuses
	// (conflict, protection, still checking), ErrOutOfDate when the head
	// moved, ErrCannotMerge when this forge cannot merge at all.
	Merge(ctx context.Context, repo Repo, pr PullRequest) error
	// Close closes the pull request without merging (a cancelled ticket);
	// closing a closed or merged one is not an error. Plain git has nothing
	// to close and returns nil.
	Close(ctx context.Context, repo Repo, pr PullRequest) error
	// CanMerge reports whether Ballet can merge on this forge; false for
	// plain git, where a human merges.
	CanMerge() bool
}

// RateLimitedError is returned (wrapped) when the forge refuses a call for
// its rate limit (HTTP 429, or 403 with X-RateLimit-Remaining: 0). Until is
// when the forge allows calls again (Retry-After, X-RateLimit-Reset): the
// caller waits until then instead of failing. Find it with errors.As.
type RateLimitedError struct {
	Until time.Time
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("forge: rate limited until %s", e.Until.UTC().Format(time.RFC3339))
}

// Errors of Forge methods, wrapped with details; test them with errors.Is.
var (
	ErrBranchNotPushed = errors.New("forge: the branch was not pushed")
	ErrInvalidBranch   = errors.New("forge: not a valid branch name")
	ErrNotMergeable    = errors.New("forge: the pull request cannot be merged now")
	ErrOutOfDate       = errors.New("forge: the pull request's head moved")
	ErrCannotMerge     = errors.New("forge: this forge cannot merge")
)
