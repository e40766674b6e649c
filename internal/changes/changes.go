// Package changes is what a ticket's branch changes against its base, as
// a person judges it before approving (GET /api/v1/items/{item}/changes):
// the branch's head, its commits (each with the stage and run of Ballet's
// runner that made it, when one did), the files it changes with their
// unified patches, and its pull request with checks and reviews when the
// forge has one.
//
// The forge-facing part is Source, declared here and implemented by each
// forge (internal/forge/gitforge reads the repository itself,
// internal/forge/github its API, internal/forge/gitea its API and, for
// the commits and patches its API does not give of a branch, the
// repository through git with the project's token). What a Source
// compares at given heads never changes, so it is kept in a bounded cache
// keyed by the repository, the branch and both head commits; the pull
// request (its checks and reviews move without a push) is read each time.
//
// The bounds (Max*) are part of the API: past them a list or a patch is cut
// and the answer says so (commits_truncated, files_truncated, a file's
// truncated, and note).
package changes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// The bounds of an answer.
const (
	MaxCommits = 250 // commits listed, newest first
	MaxFiles   = 300 // files listed
	// MaxFilePatch bounds one file's patch: a longer one is cut at a line
	// end and marked truncated.
	MaxFilePatch = 128 << 10
	// MaxPatchBytes bounds the patches of all files together: the files
	// past it come without a patch, marked truncated.
	MaxPatchBytes = 1 << 20
)

// The closed sets of the answer's string fields (the OpenAPI enums).
var (
	FileStatuses = []string{forge.FileAdded, forge.FileModified, forge.FileDeleted, forge.FileRenamed, forge.FileCopied, forge.FileChanged}
	PullStates   = []string{forge.PullOpen, forge.PullMerged, forge.PullClosed}
	CheckStates  = []string{forge.CheckPending, forge.CheckSuccess, forge.CheckFailure, forge.CheckNeutral}
	ReviewStates = []string{forge.ReviewApproved, forge.ReviewChangesRequested, forge.ReviewCommented, forge.ReviewDismissed, forge.ReviewPending}
)

// Source is a forge as this package reads it.
type Source interface {
	// Heads returns the head commits of branch and of repo.DefaultBranch
	// (HeadSHA "" when the branch does not exist).
	Heads(ctx context.Context, repo forge.Repo, branch string) (forge.Heads, error)
	// Compare reads what branch at h.HeadSHA has that the base at
	// h.BaseSHA has not, within lim.
	Compare(ctx context.Context, repo forge.Repo, branch string, h forge.Heads, lim forge.CompareLimits) (forge.Comparison, error)
	// PullRequest returns the pull request of branch whose head is the
	// branch's head commit head (an open one, else one merged or closed at
	// head: forge.Adopt), nil when there is none (or the forge has none:
	// plain git). Its reviews are stale against its own head.
	PullRequest(ctx context.Context, repo forge.Repo, branch, head string) (*forge.PullView, error)
}

// Sources picks the Source of a repository kind ("git", "gitea", "github").
type Sources func(kind string) (Source, error)

// Projects reads what the service needs of tenancy.
type Projects interface {
	FindProject(ctx context.Context, ref string) (tenancy.Project, error)
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
}

// Runs lists a ticket's runs (the stage and run a commit names must be one
// of them).
type Runs interface {
	List(ctx context.Context, itemID string) ([]run.Run, error)
}

// Service answers a ticket's changes.
type Service struct {
	Projects Projects
	Runs     Runs
	Sources  Sources
	Cache    *Cache // nil: nothing is cached
}

// Changes is GET /api/v1/items/{item}/changes.
type Changes struct {
	Branch  string `json:"branch"`   // the ticket's branch, ballet/KEY
	Base    string `json:"base"`     // the branch it merges into
	BaseSHA string `json:"base_sha"` // the base's head commit
	// Head is the branch's head commit, what an approval names; "" when the
	// branch was not pushed (then commits and files are empty).
	Head string `json:"head"`
	// Ahead counts the commits the branch has that its base has not (also
	// those past MaxCommits); 0: nothing to approve.
	Ahead            int            `json:"ahead"`
	Commits          []BranchCommit `json:"commits"`           // newest first
	CommitsTruncated bool           `json:"commits_truncated"` // more than MaxCommits: the oldest are left out
	Files            []ChangedFile  `json:"files"`
	FilesTruncated   bool           `json:"files_truncated"` // more files than listed
	// Note says in words what was left out, when something was ("": the
	// answer is whole).
	Note        string      `json:"note,omitempty"`
	PullRequest *BranchPull `json:"pull_request,omitempty"` // omitted when there is none
}

// BranchCommit is one commit of the branch.
type BranchCommit struct {
	SHA    string `json:"sha"`
	Title  string `json:"title"` // the message's first line, as written
	Author string `json:"author"`
	Time   string `json:"time"` // RFC 3339, the author's date
	// Stage and Run: Ballet's runner made the commit in this stage's run of
	// this ticket (omitted for others' commits).
	Stage string `json:"stage,omitempty"`
	Run   string `json:"run,omitempty"`
}

// ChangedFile is one file the branch changes, from the merge base to the head.
type ChangedFile struct {
	Path         string `json:"path"`
	PreviousPath string `json:"previous_path,omitempty"` // renamed or copied from
	Status       string `json:"status"`
	Additions    int    `json:"additions"`
	Deletions    int    `json:"deletions"`
	Binary       bool   `json:"binary,omitempty"`
	// Patch is the unified diff's hunks (from the first "@@"); "" for a
	// binary file or one without changed lines.
	Patch string `json:"patch"`
	// Truncated: the patch is cut (past MaxFilePatch, at a line end) or
	// left out (past MaxPatchBytes, or too large for the forge).
	Truncated bool `json:"truncated"`
}

// BranchPull is the branch's pull request.
type BranchPull struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
	State  string `json:"state"`
	// Mergeable is null while the forge computes it, false for a conflict.
	Mergeable *bool          `json:"mergeable"`
	Checks    []BranchCheck  `json:"checks"`
	Reviews   []BranchReview `json:"reviews"`
}

// BranchCheck is one status or check run of the head commit.
type BranchCheck struct {
	Name  string `json:"name"`
	State string `json:"state"`
	URL   string `json:"url,omitempty"`
}

// BranchReview is the latest review of one reviewer.
type BranchReview struct {
	Reviewer string `json:"reviewer"`
	State    string `json:"state"`
	// Stale: given on an earlier head commit, before the code pushed
	// since, or dismissed (then State is dismissed).
	Stale bool   `json:"stale"`
	URL   string `json:"url,omitempty"`
}

const errNoRepository = "the project has no repository"

// target is where a ticket's changes are read.
type target struct {
	src    Source
	kind   string
	repo   forge.Repo
	branch string
}

func (s *Service) target(ctx context.Context, it tracker.Item) (target, error) {
	proj, err := s.Projects.FindProject(ctx, it.ProjectID)
	if err != nil {
		return target{}, err
	}
	if proj.Repository == nil {
		return target{}, apperr.New(apperr.Conflict, "%s has no changes to show: %s", it.Key, errNoRepository)
	}
	org, err := s.Projects.FindOrganization(ctx, proj.OrganizationID)
	if err != nil {
		return target{}, fmt.Errorf("read the organization of project %s: %w", proj.Key, err)
	}
	src, err := s.Sources(proj.Repository.Forge)
	if err != nil {
		return target{}, err
	}
	r := proj.Repository
	return target{src: src, kind: r.Forge, branch: "ballet/" + it.Key,
		repo: forge.Repo{URL: r.URL, DefaultBranch: r.DefaultBranch, APIURL: r.APIURL, CredentialsRef: r.CredentialsRef, Organization: org.Slug}}, nil
}

// Head returns the current head commit of the ticket's branch ("" when it
// was not pushed): what an approval must name.
func (s *Service) Head(ctx context.Context, it tracker.Item) (string, error) {
	t, err := s.target(ctx, it)
	if err != nil {
		return "", err
	}
	h, err := t.src.Heads(ctx, t.repo, t.branch)
	if err != nil {
		return "", unavailable(it.Key, err)
	}
	return h.HeadSHA, nil
}

// Changes reads the ticket's branch against its base.
func (s *Service) Changes(ctx context.Context, it tracker.Item) (Changes, error) {
	t, err := s.target(ctx, it)
	if err != nil {
		return Changes{}, err
	}
	h, err := t.src.Heads(ctx, t.repo, t.branch)
	if err != nil {
		return Changes{}, unavailable(it.Key, err)
	}
	out := Changes{Branch: t.branch, Base: h.Base, BaseSHA: h.BaseSHA, Head: h.HeadSHA, Commits: []BranchCommit{}, Files: []ChangedFile{}}
	if h.HeadSHA == "" {
		return out, nil
	}
	key := cacheKey{kind: t.kind, url: t.repo.URL, branch: t.branch, base: h.BaseSHA, head: h.HeadSHA}
	cmp, ok := s.Cache.get(key)
	if !ok {
		raw, err := t.src.Compare(ctx, t.repo, t.branch, h, forge.CompareLimits{Commits: MaxCommits, Files: MaxFiles, PatchBytes: MaxPatchBytes})
		if err != nil {
			return Changes{}, unavailable(it.Key, err)
		}
		cmp = bound(raw)
		s.Cache.put(key, cmp)
	}
	runs, err := s.Runs.List(ctx, it.ID)
	if err != nil {
		return Changes{}, err
	}
	out.Ahead, out.CommitsTruncated, out.FilesTruncated, out.Note = cmp.ahead, cmp.commitsCut, cmp.filesCut, cmp.note
	out.Commits = attribute(cmp.commits, it.Key, runs)
	out.Files = cmp.files
	pr, err := t.src.PullRequest(ctx, t.repo, t.branch, h.HeadSHA)
	if err != nil {
		return Changes{}, unavailable(it.Key, err)
	}
	if pr != nil {
		out.PullRequest = pullRequest(*pr)
	}
	return out, nil
}

// unavailable is a forge's failure as the API answers it: a rate limit or
// an unreachable forge is 503; what the forge refused keeps its message.
func unavailable(key string, err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return apperr.New(apperr.Unavailable, "the changes of %s cannot be read from the forge now: %v", key, err)
}

// compared is a Comparison bounded and rendered: what the cache keeps.
type compared struct {
	ahead      int
	commits    []forge.Commit
	commitsCut bool
	files      []ChangedFile
	filesCut   bool
	note       string
	size       int // bytes, about: the cache's measure
}

// bound applies the answer's bounds to what a forge compared (pure).
func bound(c forge.Comparison) compared {
	out := compared{ahead: c.TotalCommits, commits: c.Commits, filesCut: c.FilesCut, files: []ChangedFile{}}
	if len(out.commits) > MaxCommits {
		out.commits = out.commits[:MaxCommits]
	}
	out.commitsCut = out.ahead > len(out.commits)
	if len(c.Files) > MaxFiles {
		c.Files, out.filesCut = c.Files[:MaxFiles], true
	}
	budget, cut := MaxPatchBytes, 0
	for _, f := range c.Files {
		v := ChangedFile{Path: f.Path, PreviousPath: f.PreviousPath, Status: f.Status, Additions: f.Additions, Deletions: f.Deletions,
			Binary: f.Binary, Patch: f.Patch, Truncated: f.PatchCut}
		if len(v.Patch) > MaxFilePatch {
			v.Patch, v.Truncated = cutAtLine(v.Patch, MaxFilePatch), true
		}
		if len(v.Patch) > budget {
			v.Patch, v.Truncated = "", true
		}
		budget -= len(v.Patch)
		if v.Truncated {
			cut++
		}
		out.size += len(v.Patch) + len(v.Path) + len(v.PreviousPath) + 64
		out.files = append(out.files, v)
	}
	for _, cm := range out.commits {
		out.size += len(cm.Message) + len(cm.Author) + 96
	}
	var notes []string
	if out.commitsCut {
		notes = append(notes, fmt.Sprintf("only the newest %d of %d commits are listed", len(out.commits), out.ahead))
	}
	if out.filesCut {
		notes = append(notes, fmt.Sprintf("only the first %d changed files are listed", len(out.files)))
	}
	if cut > 0 {
		notes = append(notes, fmt.Sprintf("the patches of %d files are cut or left out (at most %d KiB a file, %d KiB in all)",
			cut, MaxFilePatch>>10, MaxPatchBytes>>10))
	}
	if len(notes) > 0 {
		out.note = strings.Join(notes, "; ") + ": the forge or the repository shows the rest"
	}
	return out
}

// cutAtLine cuts s to at most n bytes, at the end of a line.
func cutAtLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return ""
}
