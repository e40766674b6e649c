package apitest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sync/atomic"

	"github.com/ballet/ballet/internal/forge"
)

// FakeForge is a forge on which every branch has been pushed and merged
// the moment the merge stage asks: EnsurePullRequest finds it, State reports
// it merged. Benchmarks install it (UseForge) so that a merge stage costs
// what Ballet does with a forge's answer, not what spawning git costs.
// It is safe for concurrent use and counts its calls.
type FakeForge struct {
	Ensures atomic.Int64 // EnsurePullRequest calls
	States  atomic.Int64 // State calls
}

var _ forge.Forge = (*FakeForge)(nil)

// EnsurePullRequest returns the branch's "pull request" into
// repo.DefaultBranch, with a head commit derived from the branch name.
func (f *FakeForge) EnsurePullRequest(ctx context.Context, repo forge.Repo, branch, title, body string) (forge.PullRequest, error) {
	f.Ensures.Add(1)
	sum := sha1.Sum([]byte(branch))
	return forge.PullRequest{Branch: branch, Base: repo.DefaultBranch, HeadSHA: hex.EncodeToString(sum[:])}, nil
}

// State reports the pull request pushed and merged, with no checks.
func (f *FakeForge) State(ctx context.Context, repo forge.Repo, pr forge.PullRequest) (forge.State, error) {
	f.States.Add(1)
	return forge.State{Branch: pr.Branch, Base: pr.Base, BranchPushed: true, Merged: true, HeadSHA: pr.HeadSHA, Checks: forge.ChecksNone}, nil
}

// Merge is never needed (State says merged) and fails like plain git's.
func (f *FakeForge) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	return fmt.Errorf("%w: the fake forge merges nothing", forge.ErrCannotMerge)
}

// Close has nothing to close.
func (f *FakeForge) Close(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	return nil
}

// CanMerge is false, as on plain git: a human merges (here: at once).
func (f *FakeForge) CanMerge() bool { return false }

// UseForge makes every project's merge stage use fg, whatever its
// repository kind. Call it before StartJobs.
func (e *Env) UseForge(fg forge.Forge) {
	e.Core.Flows.Forges = func(string) (forge.Forge, error) { return fg, nil }
}
