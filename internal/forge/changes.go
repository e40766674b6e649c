package forge

import "time"

// What a ticket's branch changes against its base, as a forge tells it: the
// read side the ticket page shows before a person approves. The forges only
// report (the commits, the files and their patches, the pull request's
// checks and reviews); bounds and the meaning of a commit (which stage and
// run made it) are decided by their user (internal/changes).

// Heads are the head commits of a ticket's branch and of its base.
type Heads struct {
	Branch, Base string
	// HeadSHA is the branch's head commit; "" when the branch does not
	// exist (not pushed yet, or deleted).
	HeadSHA string
	BaseSHA string // the base branch's head commit
}

// CompareLimits bound what Compare reads: a forge may stop early past
// them, and says so (Comparison.TotalCommits, FilesCut, PatchCut).
type CompareLimits struct {
	Commits    int // at most this many commits, newest first
	Files      int // at most this many files
	PatchBytes int // the patches of all files together, about (a forge may read a little more)
}

// Comparison is the branch against its base at given heads: the commits
// the branch has that the base has not, and the files changed between the
// merge base and the head (what merging would bring).
type Comparison struct {
	Commits      []Commit // newest first, at most CompareLimits.Commits
	TotalCommits int      // all the commits ahead, also past the limit
	Files        []FileChange
	// FilesCut: the forge listed only some of the changed files
	// (CompareLimits.Files, or its own limit).
	FilesCut bool
}

// Commit is one commit of the branch.
type Commit struct {
	SHA    string
	Author string // "Name <email>", or the forge's login when it has no more
	Time   time.Time
	// Message is the commit message as written (subject, body, trailers).
	Message string
}

// File statuses of FileChange.Status.
const (
	FileAdded    = "added"
	FileModified = "modified"
	FileDeleted  = "deleted"
	FileRenamed  = "renamed"
	FileCopied   = "copied"
	FileChanged  = "changed" // the type changed (a file became a link…)
)

// FileChange is one file the branch changes.
type FileChange struct {
	Path         string
	PreviousPath string // renamed or copied from; "" otherwise
	Status       string // File* constants
	Additions    int
	Deletions    int
	Binary       bool
	// Patch is the file's unified diff (hunks, from the first "@@"; the
	// forge's headers removed); "" for a binary file or one without
	// changed lines (a rename, a mode change).
	Patch string
	// PatchCut: the forge gave only part of the patch, or none though it
	// has one (too large for the forge, or past CompareLimits.PatchBytes).
	PatchCut bool
}

// Pull request states of PullView.State.
const (
	PullOpen   = "open"
	PullMerged = "merged"
	PullClosed = "closed" // closed without merging
)

// Check states of CheckView.State (one check; State.Checks combines them).
const (
	CheckPending = "pending"
	CheckSuccess = "success"
	CheckFailure = "failure"
	CheckNeutral = "neutral" // neither passed nor failed: skipped, neutral
)

// PullView is a ticket's pull request as a person reviews it.
type PullView struct {
	Number  int
	URL     string // its web page
	State   string // Pull* constants
	HeadSHA string // the head commit the forge sees
	// Mergeable is nil while unknown or being computed, false only for a
	// definite conflict (as State.Mergeable).
	Mergeable *bool
	Checks    []CheckView // every status and check run of the head commit
	Reviews   []ReviewView
}

// CheckView is one commit status or check run of the head commit.
type CheckView struct {
	Name  string
	State string // Check* constants
	URL   string // its page (a status's target URL, a check run's details); may be ""
}

// Review states of ReviewView.State.
const (
	ReviewApproved         = "approved"
	ReviewChangesRequested = "changes_requested"
	ReviewCommented        = "commented"
	ReviewDismissed        = "dismissed"
	ReviewPending          = "pending"
)

// ReviewView is the latest review of one reviewer.
type ReviewView struct {
	Reviewer string
	State    string // Review* constants
	// Stale: the review was given on an earlier head commit; it did not see
	// the code pushed since.
	Stale bool
	URL   string // may be ""
	Time  time.Time
}

// LatestReviews keeps the latest review of each reviewer from reviews in
// the forge's order (oldest first), in the order reviewers first appear
// (pure; the forges share it). A verdict (approved, changes requested,
// dismissed) outlives the comments and requests given after it: a reviewer
// who approved and then commented still shows the approval. A reviewer
// without a verdict shows their latest comment, or pending.
func LatestReviews(reviews []ReviewView) []ReviewView {
	verdict := func(s string) bool {
		return s == ReviewApproved || s == ReviewChangesRequested || s == ReviewDismissed
	}
	latest := map[string]int{} // reviewer → index in out
	var out []ReviewView
	for _, r := range reviews {
		i, seen := latest[r.Reviewer]
		switch {
		case !seen:
			latest[r.Reviewer] = len(out)
			out = append(out, r)
		case verdict(r.State) || !verdict(out[i].State):
			out[i] = r
		}
	}
	return out
}
