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
//   - a commit without statuses is forge.ChecksNone (not pending); error
//     fails like failure, skipped and warning pass, and a state not known
//     fails;
//   - reviews: the latest APPROVED or REQUEST_CHANGES of each reviewer
//     decides; dismissed reviews do not count, nor do reviews that are not
//     official (reviewers without write access, or outside a branch
//     protection's approvers); a review counts for the head only when it
//     reviewed that commit and is not stale (Gitea marks reviews stale a
//     moment after a push, not at once), else an approval does not count
//     and a change request is an earlier one.
//
// Rate limits (429, or 403 with X-RateLimit-Remaining: 0) become
// *forge.RateLimitedError; 5xx answers and timeouts plain wrapped errors.
//
// Files by responsibility: gitea.go the Forge and its options; api.go one
// API call (the repository's location and token, the SDK client, errors);
// pulls.go finding, opening and closing pull requests; state.go reading a
// pull request's state (head, checks, reviews); conflict.go telling a
// conflict from a check still running; merge.go merging; changes.go a
// ticket's changes as a person reviews them (changes.Source).
package gitea

import (
	"net/http"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/gitforge"
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

// DefaultMergeTimeout is Options.MergeTimeout's default. Gitea answers a
// merge only after it has merged, run the repository's hooks and pushed the
// base: a busy Gitea takes longer than DefaultTimeout, and a merge given up
// on by Ballet goes on in Gitea.
const DefaultMergeTimeout = 3 * time.Minute

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
	// GitCache is the directory of the bare mirrors a ticket's changes are
	// read from (changes.go); "": Compare fails.
	GitCache string
	// MergeTimeout bounds the merge request, whatever the HTTP client's own
	// timeout. 0: DefaultMergeTimeout.
	MergeTimeout time.Duration
}

// DefaultConflictAfter is Options.ConflictAfter's default: Gitea's check
// of a pull request takes seconds; minutes of "unmergeable" at the same
// heads is a conflict.
const DefaultConflictAfter = 2 * time.Minute

// Forge is the Gitea forge. Its methods are safe for concurrent use.
type Forge struct {
	hc      *http.Client
	mergeHC *http.Client // hc with the merge's timeout
	secrets forge.Secrets
	clock   clock.Clock
	tries   int
	wait    time.Duration

	conflictAfter time.Duration
	mu            sync.Mutex
	since         map[unmergeable]time.Time // when each was first seen unmergeable
	git           *gitforge.Forge           // reads a branch's changes; nil without Options.GitCache
}

var _ forge.Forge = (*Forge)(nil)

// New returns a Gitea forge.
func New(o Options) *Forge {
	f := &Forge{hc: outbound.Guard(o.HTTPClient), secrets: forge.OrDenyAll(o.Secrets), clock: o.Clock, tries: o.MergeableTries, wait: o.MergeableWait,
		conflictAfter: o.ConflictAfter, since: map[unmergeable]time.Time{}}
	if o.GitCache != "" {
		f.git = gitforge.New(o.GitCache)
	}
	if f.conflictAfter == 0 {
		f.conflictAfter = DefaultConflictAfter
	}
	if o.HTTPClient == nil {
		f.hc.Timeout = DefaultTimeout
	}
	mc := *f.hc
	mc.Timeout = o.MergeTimeout
	if mc.Timeout <= 0 {
		mc.Timeout = DefaultMergeTimeout
	}
	f.mergeHC = &mc
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
