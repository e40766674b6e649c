package gitforge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
)

// Merging is the plain-git forge of test builds (ForBuild with the
// ballet_testforge build tag): it reads a repository like Forge, but Ballet
// can merge there (CanMerge is true), so that the failure suite and the
// restart test exercise Ballet's own merge across Core kills and see a
// double merge. Production builds never construct it: on plain git a human
// merges (spec pipelines.md "Platform merge stages").
//
// It models what the Gitea and GitHub forges will guarantee:
//
//   - Merge merges exactly the head commit the caller decided on
//     (pr.HeadSHA): when the branch has moved since, it refuses with
//     forge.ErrOutOfDate and merges nothing;
//   - State says whether the branch was merged and by which head commit
//     (State.HeadSHA of a merged pull request), even after the branch
//     moved on;
//   - every merge is a durable record: a merge commit on the base branch,
//     written with a compare-and-swap of the base ref, whose second parent
//     is the merged head and whose subject is MergeSubject (see Merges).
//
// Unlike a real forge it does not refuse to merge a pull request it merged
// before: it merges again, so that a test counts a second merge by Ballet
// as a second merge commit instead of never seeing it.
//
// Only repositories given by a local path are supported. Right after a merge
// commit lands, the fault point "forge.merged" is passed (internal/fault), so
// the failure suite can kill Core between a merge and its record.
type Merging struct {
	*Forge
}

// NewMerging returns the merging test forge (cacheDir as for New).
func NewMerging(cacheDir string) *Merging { return &Merging{Forge: New(cacheDir)} }

var _ forge.Forge = (*Merging)(nil)

// FaultMerged is the fault point passed right after a merge commit landed.
const FaultMerged = "forge.merged"

// mergeTries bounds how often Merge retries when the base branch moved
// under it (another merge landed meanwhile).
const mergeTries = 50

// CanMerge is true: Ballet merges on this forge.
func (m *Merging) CanMerge() bool { return true }

// MergeSubject is the subject of the merge commit Merging writes for branch
// at head commit sha.
func MergeSubject(branch, sha string) string {
	return fmt.Sprintf("ballet: merge %s at %s", branch, sha)
}

// State is Forge.State, plus what a forge that merges knows: a branch that
// Ballet merged is merged — by the head commit it merged (HeadSHA) — even
// when the branch moved on since; and an open pull request is Mergeable
// when its head merges into the base without conflicts.
func (m *Merging) State(ctx context.Context, repo forge.Repo, pr forge.PullRequest) (forge.State, error) {
	st, err := m.Forge.State(ctx, repo, pr)
	if err != nil {
		return st, err
	}
	if !isLocal(repo.URL) {
		return st, nil
	}
	onBase := repo
	onBase.DefaultBranch = st.Base
	merges, err := m.Merges(ctx, onBase, pr.Branch)
	if err != nil {
		return forge.State{}, err
	}
	if len(merges) > 0 {
		st.Merged, st.Open, st.Closed, st.HeadSHA = true, false, false, merges[0]
		return st, nil
	}
	if st.Open {
		_, conflict, err := m.mergeTree(ctx, gitDir(repo.URL), "refs/heads/"+st.Base, st.HeadSHA)
		if err != nil {
			return forge.State{}, err
		}
		ok := !conflict
		st.Mergeable = &ok
	}
	return st, nil
}

// Merge merges pr.HeadSHA into pr.Base (else repo.DefaultBranch) with a
// merge commit, when the branch's head is still pr.HeadSHA; else
// forge.ErrOutOfDate. A conflict is forge.ErrNotMergeable.
func (m *Merging) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	base := pr.Base
	if base == "" {
		base = repo.DefaultBranch
	}
	if err := m.check(repo.URL, pr.Branch, base); err != nil {
		return err
	}
	if !isLocal(repo.URL) {
		return fmt.Errorf("%w: the test forge merges only repositories given by a local path", forge.ErrCannotMerge)
	}
	if !shaRE.MatchString(pr.HeadSHA) {
		return fmt.Errorf("gitforge: merge %s: %q is not a commit id", pr.Branch, pr.HeadSHA)
	}
	dir := gitDir(repo.URL)
	var moved string // the base a failed update-ref expected
	var failed error
	for range mergeTries {
		heads, err := m.lsRemote(ctx, repo.URL, pr.Branch, base)
		if err != nil {
			return err
		}
		baseSHA, ok := heads[base]
		if !ok {
			return fmt.Errorf("gitforge: the default branch %s does not exist in %s", base, redact(repo.URL))
		}
		if baseSHA == moved {
			return fmt.Errorf("gitforge: merge %s: %s has not moved, yet its update failed: %w", pr.Branch, base, failed)
		}
		if head := heads[pr.Branch]; head != pr.HeadSHA {
			return fmt.Errorf("%w: %s is at %q, not at %s", forge.ErrOutOfDate, pr.Branch, head, pr.HeadSHA)
		}
		tree, conflict, err := m.mergeTree(ctx, dir, baseSHA, pr.HeadSHA)
		if err != nil {
			return err
		}
		if conflict {
			return fmt.Errorf("%w: %s conflicts with %s", forge.ErrNotMergeable, pr.Branch, base)
		}
		commit, err := m.git(ctx, "--git-dir="+dir, "-c", "user.name=Ballet", "-c", "user.email=ballet@ballet.invalid",
			"commit-tree", tree, "-p", baseSHA, "-p", pr.HeadSHA, "-m", MergeSubject(pr.Branch, pr.HeadSHA))
		if err != nil {
			return err
		}
		// Compare and swap: the base moves only from the head merged into.
		if err := RecoverStaleLocks(dir, "refs/heads/"+base, time.Now()); err != nil {
			return err
		}
		_, err = m.git(ctx, "--git-dir="+dir, "update-ref", "-m", "ballet merge", "refs/heads/"+base, strings.TrimSpace(commit), baseSHA)
		if err == nil {
			fault.Hit(FaultMerged)
			return nil
		}
		if exitCode(err) < 0 {
			return err
		}
		// The base moved (another merge landed): merge into its new head.
		moved, failed = baseSHA, err
	}
	return fmt.Errorf("%w: %s kept moving while %s was merged", forge.ErrNotMergeable, base, pr.Branch)
}

// mergeTree writes the tree of merging head into base; conflict reports
// a merge that does not apply cleanly.
func (m *Merging) mergeTree(ctx context.Context, dir, base, head string) (tree string, conflict bool, err error) {
	out, err := m.git(ctx, "--git-dir="+dir, "merge-tree", "--write-tree", "--no-messages", base, head)
	switch {
	case err == nil:
		return strings.TrimSpace(out), false, nil
	case exitCode(err) == 1:
		return "", true, nil
	}
	return "", false, err
}

// Merges lists the head commits of branch that Ballet merged into the
// default branch of repo, newest first: one per merge commit whose subject
// is MergeSubject. A test counts Ballet's merges of a ticket with it.
func (m *Merging) Merges(ctx context.Context, repo forge.Repo, branch string) ([]string, error) {
	if err := m.check(repo.URL, branch, repo.DefaultBranch); err != nil {
		return nil, err
	}
	if !isLocal(repo.URL) {
		return nil, errors.New("gitforge: the test forge reads merges only of repositories given by a local path")
	}
	out, err := m.git(ctx, "--git-dir="+gitDir(repo.URL), "log", "--first-parent", "--merges", "--format=%P%x09%s",
		"refs/heads/"+repo.DefaultBranch, "--")
	if err != nil {
		return nil, err
	}
	var heads []string
	for _, line := range strings.Split(out, "\n") {
		parents, subject, ok := strings.Cut(line, "\t")
		p := strings.Fields(parents)
		if !ok || len(p) != 2 || subject != MergeSubject(branch, p[1]) {
			continue
		}
		heads = append(heads, p[1])
	}
	return heads, nil
}

// StaleRefLock is how old a ref's lock file must be before
// RecoverStaleLocks recovers the stale locks an update of ref can be
// stopped by: ref's own, and HEAD's (update-ref locks HEAD too, for its
// log, when HEAD points at ref, as it does at the default branch).
func RecoverStaleLocks(dir, ref string, now time.Time) error {
	for _, r := range []string{ref, "HEAD"} {
		if _, err := RecoverStaleRefLock(dir, r, now); err != nil {
			return err
		}
	}
	return nil
}

// RecoverStaleRefLock removes it: git holds one for milliseconds while it
// updates the ref, so a lock this old was left by a process that was killed
// holding it.
const StaleRefLock = 2 * time.Second

// RecoverStaleRefLock removes ref's lock file (ref + ".lock") in the git
// directory dir when it is older than StaleRefLock at now, and reports
// whether it did. git leaves the lock behind when the process updating the
// ref is killed between taking and releasing it (a Core killed during a
// merge), and every later update of that ref then fails with "File exists".
// A forge's server recovers its own locks after a crash; the test forge,
// which writes the repository itself, must do it, and so must a test that
// pushes to the same repository as a person would.
func RecoverStaleRefLock(dir, ref string, now time.Time) (bool, error) {
	lock := filepath.Join(dir, filepath.FromSlash(ref)+".lock")
	fi, err := os.Stat(lock)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("gitforge: the lock of %s: %w", ref, err)
	}
	if now.Sub(fi.ModTime()) < StaleRefLock {
		return false, nil
	}
	if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("gitforge: removing the stale lock of %s: %w", ref, err)
	}
	return true, nil
}
