// Package gitforge is the plain git forge: a bare repository on disk, or a
// git URL (file://, http(s)://, ssh://, user@host:path: forge.CheckLocation). Plain git has no
// pull requests, checks or reviews, and Ballet cannot merge there: a human
// merges, and the merge stage waits until the branch's head commit is
// contained in the default branch.
//
// EnsurePullRequest only checks that the branch was pushed and records its
// head commit; State answers from `git ls-remote` and, to tell whether the
// head is contained in the default branch, from the objects: a local
// repository is read directly (`merge-base --is-ancestor`), a URL through a
// bare mirror under the cache directory that fetches only the default branch
// when its head is not there yet.
//
// What counts as merged: the head commit (the current one, or the one
// recorded in the PullRequest once the branch was deleted) is an ancestor of
// the default branch's head — a fast-forward or a merge commit. A squash or
// rebase merge creates other commits, so it is not recognised: while the
// branch exists the stage keeps waiting, once it is deleted the stage fails
// as "deleted without being merged". A branch without commits of its own
// counts as merged (there is nothing left to merge).
//
// git runs without a shell, with GIT_TERMINAL_PROMPT=0 and ssh in batch mode
// (credentials come from an ssh agent or a credential helper, never a
// prompt), only the file, http(s) and ssh transports (GIT_ALLOW_PROTOCOL:
// no ext::, fd:: or git://), a timeout per command, and errors that carry
// git's stderr with URL credentials removed. A location and branch names are
// checked again before every command, whatever the database holds, and
// every user value follows "--" or an option's "=".
package gitforge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/gitexec"
)

// DefaultTimeout bounds one git command unless Forge.Timeout says otherwise.
const DefaultTimeout = 2 * time.Minute

// Forge is the plain git forge. Its methods are safe for concurrent use.
type Forge struct {
	// CacheDir holds the bare mirrors of repositories given by URL; a local
	// repository needs none.
	CacheDir string
	Git      string        // the git binary; "git" from PATH when empty
	Timeout  time.Duration // per git command; DefaultTimeout when 0

	mirrors gitexec.Mirrors
}

// New returns a plain git forge that keeps mirrors under cacheDir.
func New(cacheDir string) *Forge {
	return &Forge{CacheDir: cacheDir}
}

var _ forge.Forge = (*Forge)(nil)

// Close has nothing to close on plain git: there are no pull requests.
func (f *Forge) Close(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error { return nil }

// CanMerge is false: on plain git a human merges.
func (f *Forge) CanMerge() bool { return false }

// Merge always fails with forge.ErrCannotMerge.
func (f *Forge) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	return fmt.Errorf("%w: plain git has no pull requests; a human merges %s into %s", forge.ErrCannotMerge, pr.Branch, pr.Base)
}

// EnsurePullRequest returns the "pull request" of branch into
// repo.DefaultBranch: the branch, its base and its head commit. It fails
// with forge.ErrBranchNotPushed when the branch is not in the repository.
// title and body are not used: plain git has nowhere to put them.
func (f *Forge) EnsurePullRequest(ctx context.Context, repo forge.Repo, branch, title, body string) (forge.PullRequest, error) {
	base := repo.DefaultBranch
	if err := f.check(repo.URL, branch, base); err != nil {
		return forge.PullRequest{}, err
	}
	heads, err := f.lsRemote(ctx, repo.URL, branch, base)
	if err != nil {
		return forge.PullRequest{}, err
	}
	if _, ok := heads[base]; !ok {
		return forge.PullRequest{}, fmt.Errorf("gitforge: the default branch %s does not exist in %s", base, redact(repo.URL))
	}
	sha, ok := heads[branch]
	if !ok {
		return forge.PullRequest{}, fmt.Errorf("%w: %s is not in %s", forge.ErrBranchNotPushed, branch, redact(repo.URL))
	}
	return forge.PullRequest{Branch: branch, Base: base, HeadSHA: sha}, nil
}

// State reports whether pr's branch exists and whether its head commit —
// the current one, else pr.HeadSHA — is contained in the base (pr.Base,
// else repo.DefaultBranch). A deleted branch whose recorded head is not
// contained is Closed; one that was never seen reports nothing but
// BranchPushed false. Checks is always "none" and Mergeable nil.
func (f *Forge) State(ctx context.Context, repo forge.Repo, pr forge.PullRequest) (forge.State, error) {
	base := pr.Base
	if base == "" {
		base = repo.DefaultBranch
	}
	if err := f.check(repo.URL, pr.Branch, base); err != nil {
		return forge.State{}, err
	}
	if pr.HeadSHA != "" && !shaRE.MatchString(pr.HeadSHA) {
		return forge.State{}, fmt.Errorf("gitforge: %q is not a commit id", pr.HeadSHA)
	}
	heads, err := f.lsRemote(ctx, repo.URL, pr.Branch, base)
	if err != nil {
		return forge.State{}, err
	}
	baseSHA, ok := heads[base]
	if !ok {
		return forge.State{}, fmt.Errorf("gitforge: the default branch %s does not exist in %s", base, redact(repo.URL))
	}
	st := forge.State{Branch: pr.Branch, Base: base, Checks: forge.ChecksNone}
	st.HeadSHA, st.BranchPushed = heads[pr.Branch]
	if !st.BranchPushed {
		if pr.HeadSHA == "" {
			return st, nil // never pushed, or never seen
		}
		st.HeadSHA = pr.HeadSHA
	}
	merged, err := f.contains(ctx, repo.URL, base, baseSHA, st.HeadSHA)
	if err != nil {
		return forge.State{}, err
	}
	st.Merged = merged
	st.Open = st.BranchPushed && !merged
	st.Closed = !st.BranchPushed && !merged
	return st, nil
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// check validates the repository location and the branch names before any
// of them reaches a git command line (forge.CheckLocation,
// forge.CheckBranch): the settings were checked when saved, and are checked
// again here, where git runs, whatever the database holds.
func (f *Forge) check(url string, branches ...string) error {
	if err := forge.CheckLocation(forge.KindGit, url); err != nil {
		return fmt.Errorf("gitforge: the repository location is refused: %s", gitexec.RedactURLsIn(err.Error(), url))
	}
	for _, b := range branches {
		if err := forge.CheckBranch(b); err != nil {
			return fmt.Errorf("%w: %v", forge.ErrInvalidBranch, err)
		}
	}
	if branches[0] == branches[1] {
		return fmt.Errorf("%w: %s is the default branch itself", forge.ErrInvalidBranch, branches[0])
	}
	return nil
}

// lsRemote returns the head commits of those of branches that exist.
func (f *Forge) lsRemote(ctx context.Context, url string, branches ...string) (map[string]string, error) {
	args := []string{"ls-remote", "--", url}
	for _, b := range branches {
		args = append(args, "refs/heads/"+b)
	}
	out, err := f.git(ctx, args...)
	if err != nil {
		return nil, err
	}
	heads := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		sha, ref, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		// ls-remote matches patterns by their tail: keep exact names only.
		for _, b := range branches {
			if ref == "refs/heads/"+b && shaRE.MatchString(sha) {
				heads[b] = sha
			}
		}
	}
	return heads, nil
}

// contains reports whether commit sha is an ancestor of baseSHA, the head
// of branch base.
func (f *Forge) contains(ctx context.Context, url, base, baseSHA, sha string) (bool, error) {
	if isLocal(url) {
		return f.isAncestor(ctx, gitDir(url), sha, baseSHA)
	}
	dir, unlock, err := f.mirror(ctx, url)
	if err != nil {
		return false, err
	}
	defer unlock()
	// Mirror objects come only from complete fetches: when the base head is
	// there, so is its history.
	have, err := f.hasCommit(ctx, dir, baseSHA)
	if err != nil {
		return false, err
	}
	target := baseSHA
	if !have {
		ref := "refs/heads/" + base
		if _, err := f.git(ctx, "-c", "gc.autoDetach=false", "--git-dir="+dir, "fetch", "--quiet", "--no-tags",
			"--no-write-fetch-head", "--", url, "+"+ref+":"+ref); err != nil {
			return false, err
		}
		if have, err = f.hasCommit(ctx, dir, baseSHA); err != nil {
			return false, err
		} else if !have {
			target = ref // the base moved (force push) since ls-remote: judge by its newest head
		}
	}
	return f.isAncestor(ctx, dir, sha, target)
}

// isAncestor reports whether commit sha is contained in target; a commit
// the repository does not have is not.
func (f *Forge) isAncestor(ctx context.Context, dir, sha, target string) (bool, error) {
	if have, err := f.hasCommit(ctx, dir, sha); err != nil || !have {
		return false, err
	}
	return f.runner().IsAncestor(ctx, dir, sha, target)
}

func (f *Forge) hasCommit(ctx context.Context, dir, sha string) (bool, error) {
	_, err := f.git(ctx, "--git-dir="+dir, "cat-file", "-e", sha+"^{commit}")
	if err != nil && exitCode(err) > 0 {
		return false, nil
	}
	return err == nil, err
}

// mirror returns the bare mirror of url, created when missing, locked until
// unlock is called.
func (f *Forge) mirror(ctx context.Context, url string) (dir string, unlock func(), err error) {
	if f.CacheDir == "" {
		return "", nil, errors.New("gitforge: a cache directory is needed for repositories given by URL")
	}
	// git runs in another directory (gitexec): a relative cache (Core's
	// next to a relative database path) is made absolute first.
	root, err := filepath.Abs(f.CacheDir)
	if err != nil {
		return "", nil, fmt.Errorf("gitforge: the cache directory: %w", err)
	}
	return f.mirrors.Open(ctx, f.runner(), root, url)
}

// isLocal reports whether git would read location as a local path rather
// than a URL or an scp-like user@host:path.
func isLocal(location string) bool {
	if strings.Contains(location, "://") {
		return false
	}
	colon := strings.IndexByte(location, ':')
	if colon < 0 {
		return true
	}
	slash := strings.IndexByte(location, '/')
	return slash >= 0 && slash < colon
}

// gitDir is the git directory of a local repository: the path itself when it
// is bare, its .git inside a work tree.
func gitDir(path string) string {
	if fi, err := os.Stat(filepath.Join(path, ".git")); err == nil && fi.IsDir() {
		return filepath.Join(path, ".git")
	}
	return path
}
