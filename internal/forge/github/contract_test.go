package github

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/forgetest"
	"github.com/ballet/ballet/internal/forge/githubfake"
)

// TestContract runs the forge contract on the GitHub client against the
// GitHub fake, once with CI reporting commit statuses and once with check
// runs only (what GitHub Actions does).
func TestContract(t *testing.T) {
	t.Run("Statuses", func(t *testing.T) { forgetest.Run(t, newContractHarness(t, false)) })
	t.Run("CheckRuns", func(t *testing.T) { forgetest.Run(t, newContractHarness(t, true)) })
}

// TestPolicy runs the merge-policy table on the GitHub client against the
// GitHub fake, with CI reporting commit statuses and check runs.
func TestPolicy(t *testing.T) {
	t.Run("Statuses", func(t *testing.T) { forgetest.Policy(t, newContractHarness(t, false)) })
	t.Run("CheckRuns", func(t *testing.T) { forgetest.Policy(t, newContractHarness(t, true)) })
}

// contractHarness is one fake GitHub with a repository per test, acme/rN,
// whose token Ballet reads from GH_TOKEN.
type contractHarness struct {
	fake      *githubfake.Server
	f         *Forge
	checkRuns bool // CI reports check runs, not statuses
	n         atomic.Int64
}

func newContractHarness(t *testing.T, checkRuns bool) *contractHarness {
	fake := githubfake.New(githubfake.Options{Token: token})
	t.Cleanup(fake.Close)
	lookup := func(name string) (string, bool) {
		if name == "GH_TOKEN" {
			return token, true
		}
		return "", false
	}
	return &contractHarness{fake: fake, f: New(Options{Secrets: envs(lookup)}), checkRuns: checkRuns}
}

func (h *contractHarness) Forge() forge.Forge { return h.f }

func (h *contractHarness) Caps() forgetest.Caps {
	c := forgetest.Caps{PullRequests: true, Merge: true, MergeOnce: true, Checks: true, Reviews: true,
		Dismiss: true, Protection: true, ShareRepo: true,
		// A commit status is one of four states.
		CheckStates: []string{forgetest.StatePending, forgetest.StateSuccess, forgetest.StateFailure, forgetest.StateError}}
	if h.checkRuns {
		c.CheckStates = []string{forgetest.StatePending, forgetest.StateSuccess, forgetest.StateFailure, forgetest.StateNeutral,
			forgetest.StateCancelled, forgetest.StateSkipped, forgetest.StateTimedOut, forgetest.StateActionRequired,
			forgetest.StateStale, forgetest.StateUnknown}
	}
	return c
}

func (h *contractHarness) NewRepo(t testing.TB) forgetest.Repo {
	name := fmt.Sprintf("r%d", h.n.Add(1))
	h.fake.AddRepo("acme", name, "main")
	return &contractRepo{h: h, name: name}
}

type contractRepo struct {
	h      *contractHarness
	name   string
	pushes atomic.Int64

	mu      sync.Mutex
	reviews map[[2]int]int64 // pull request, reviewer → the latest review's id
}

func (r *contractRepo) Repo() forge.Repo {
	return forge.Repo{URL: "https://github.com/acme/" + r.name + ".git", DefaultBranch: "main", APIURL: r.h.fake.URL, CredentialsRef: "env:GH_TOKEN"}
}

func (r *contractRepo) Push(t testing.TB, branch string) string {
	sha := githubfake.SHA(fmt.Sprintf("%s %s %d", r.name, branch, r.pushes.Add(1)))
	r.h.fake.Push("acme", r.name, branch, sha)
	return sha
}

func (r *contractRepo) CommitFiles(t testing.TB, branch string, commits ...forgetest.FileCommit) []string {
	var shas []string
	for _, c := range commits {
		shas = append(shas, r.h.fake.CommitFile("acme", r.name, branch, githubfake.Commit{Message: c.Message,
			AuthorName: "Ballet agent", AuthorEmail: "agent@ballet.invalid", Path: c.Path, Content: c.Content}))
	}
	return shas
}

func (r *contractRepo) PullRequests(t testing.TB, branch string) []forgetest.Opened {
	var out []forgetest.Opened
	for _, p := range r.h.fake.PullRequests("acme", r.name) {
		if p.Head == branch {
			out = append(out, forgetest.Opened{Number: p.Number, Title: p.Title, Body: p.Body, Open: p.Open})
		}
	}
	return out
}

func (r *contractRepo) MergesOf(t testing.TB, sha string) int {
	n := 0
	for _, p := range r.h.fake.PullRequests("acme", r.name) {
		if p.MergedSHA == sha {
			n += p.Merges
		}
	}
	return n
}

func (r *contractRepo) MergeByHand(t testing.TB, pr forge.PullRequest) {
	r.h.fake.MergeByHand("acme", r.name, pr.Number)
}

func (r *contractRepo) OpenByHand(t testing.TB, branch, title, body string) int {
	return r.h.fake.OpenPullRequest("acme", r.name, branch, "main", title, body)
}

func (r *contractRepo) CloseByHand(t testing.TB, pr forge.PullRequest) {
	r.h.fake.ClosePullRequest("acme", r.name, pr.Number)
}

// SetStatus reports a commit status, or in the check-run variant a check
// run named context: pending is in progress, success and failure are the
// conclusions of a completed run.
func (r *contractRepo) SetStatus(t testing.TB, sha, context, state string) {
	if !r.h.checkRuns {
		r.h.fake.SetStatusURL("acme", r.name, sha, context, state, forgetest.StatusURL(context))
		return
	}
	switch state {
	case forgetest.StatePending:
		r.h.fake.SetCheckRunURL("acme", r.name, sha, context, "in_progress", "", forgetest.StatusURL(context))
	case forgetest.StateUnknown: // a conclusion GitHub may add one day
		r.h.fake.SetCheckRunURL("acme", r.name, sha, context, "completed", "deferred_to_a_future_version", forgetest.StatusURL(context))
	default:
		r.h.fake.SetCheckRunURL("acme", r.name, sha, context, "completed", state, forgetest.StatusURL(context))
	}
}

func (r *contractRepo) DeleteBranch(t testing.TB, branch string) {
	r.h.fake.DeleteBranch("acme", r.name, branch)
}

func (r *contractRepo) DismissReview(t testing.TB, pr forge.PullRequest, reviewer int) {
	r.mu.Lock()
	id, ok := r.reviews[[2]int{pr.Number, reviewer}]
	r.mu.Unlock()
	if !ok {
		t.Fatalf("reviewer %d has not reviewed #%d", reviewer, pr.Number)
	}
	r.h.fake.DismissReview("acme", r.name, pr.Number, id)
}

func (r *contractRepo) Protect(t testing.TB, p forgetest.Protection) {
	r.h.fake.Protect("acme", r.name, "main", githubfake.Protection{Checks: p.Checks, Approvals: p.Approvals, DismissStale: p.DismissStale})
}

// Review reviews as one of two collaborators: reviewer 0 is a member of
// the owning organisation, reviewer 1 an outside collaborator (both have
// write access, both count).
func (r *contractRepo) Review(t testing.TB, pr forge.PullRequest, reviewer int, approve bool, body string) string {
	user, assoc := "reviewer-0", "MEMBER"
	if reviewer == 1 {
		user, assoc = "reviewer-1", "COLLABORATOR"
	}
	state := "CHANGES_REQUESTED"
	if approve {
		state = "APPROVED"
	}
	id := r.h.fake.AddReview("acme", r.name, pr.Number, user, assoc, state, body)
	r.mu.Lock()
	if r.reviews == nil {
		r.reviews = map[[2]int]int64{}
	}
	r.reviews[[2]int{pr.Number, reviewer}] = id
	r.mu.Unlock()
	return user
}
