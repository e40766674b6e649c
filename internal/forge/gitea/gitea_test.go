package gitea

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/forgetest"
	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

func TestMain(m *testing.M) { os.Exit(giteatest.Main(m)) }

// harness runs the forge contract on the package's real Gitea. Every
// repository has its owner (whose token Ballet uses, from its own
// environment variable) and two collaborators with write access who review.
type harness struct {
	srv *giteatest.Server
	f   *Forge
	env sync.Map // variable → token
	n   int
	mu  sync.Mutex
}

func newHarness(t testing.TB) *harness {
	h := &harness{srv: giteatest.Shared(t)}
	h.f = New(Options{Secrets: envs(func(k string) (string, bool) {
		v, ok := h.env.Load(k)
		if !ok {
			return "", false
		}
		return v.(string), true
	}), MergeableTries: 20, MergeableWait: 100 * time.Millisecond, GitCache: t.TempDir()})
	return h
}

func (h *harness) Forge() forge.Forge { return h.f }

func (h *harness) Caps() forgetest.Caps {
	return forgetest.Caps{PullRequests: true, Merge: true, MergeOnce: true, Checks: true, Reviews: true,
		CheckStates: []string{forgetest.StatePending, forgetest.StateSuccess, forgetest.StateFailure, forgetest.StateError,
			forgetest.StateWarning, forgetest.StateSkipped},
		Dismiss: true, Protection: true, ShareRepo: true}
}

func (h *harness) NewRepo(t testing.TB) forgetest.Repo {
	owner := h.srv.CreateUser(t, "owner")
	r := &repo{g: h.srv.CreateRepo(t, owner), srv: h.srv}
	for range 2 {
		u := h.srv.CreateUser(t, "reviewer")
		h.srv.AddCollaborator(t, r.g, u)
		r.reviewers = append(r.reviewers, u)
	}
	h.mu.Lock()
	h.n++
	r.env = fmt.Sprintf("GITEA_TEST_TOKEN_%d", h.n)
	h.mu.Unlock()
	h.env.Store(r.env, owner.Token)
	return r
}

type repo struct {
	g         *giteatest.Repo
	srv       *giteatest.Server
	reviewers []giteatest.User
	env       string

	mu      sync.Mutex
	reviews map[[2]int]int64 // pull request, reviewer → the latest review's id
}

func (r *repo) Repo() forge.Repo {
	return forge.Repo{URL: r.g.CloneURL, DefaultBranch: "main", CredentialsRef: "env:" + r.env}
}

func (r *repo) Push(t testing.TB, branch string) string { return r.g.PushBranch(t, branch) }

func (r *repo) CommitFiles(t testing.TB, branch string, commits ...forgetest.FileCommit) []string {
	var cs []giteatest.Change
	for _, c := range commits {
		cs = append(cs, giteatest.Change{File: c.Path, Content: c.Content, Message: c.Message})
	}
	return r.g.Commits(t, branch, cs...)
}

func (r *repo) PullRequests(t testing.TB, branch string) []forgetest.Opened {
	var out []forgetest.Opened
	for _, p := range r.g.ListPulls(t) {
		if p.Head != nil && p.Head.Ref == branch {
			out = append(out, forgetest.Opened{Number: int(p.Index), Title: p.Title, Body: p.Body, Open: p.State == "open"})
		}
	}
	return out
}

func (r *repo) MergeByHand(t testing.TB, pr forge.PullRequest) { r.g.MergeByHand(t, pr.Number) }

func (r *repo) OpenByHand(t testing.TB, branch, title, body string) int {
	return r.g.CreatePR(t, branch, title, body)
}

func (r *repo) CloseByHand(t testing.TB, pr forge.PullRequest) { r.g.ClosePR(t, pr.Number) }

func (r *repo) Review(t testing.TB, pr forge.PullRequest, reviewer int, approve bool, body string) string {
	event := giteatest.RequestChanges
	if approve {
		event = giteatest.Approve
	}
	u := r.reviewers[reviewer]
	id := r.g.Review(t, pr.Number, u, event, body)
	r.mu.Lock()
	if r.reviews == nil {
		r.reviews = map[[2]int]int64{}
	}
	r.reviews[[2]int{pr.Number, reviewer}] = id
	r.mu.Unlock()
	return u.Name
}

func (r *repo) DismissReview(t testing.TB, pr forge.PullRequest, reviewer int) {
	r.mu.Lock()
	id, ok := r.reviews[[2]int{pr.Number, reviewer}]
	r.mu.Unlock()
	if !ok {
		t.Fatalf("reviewer %d has not reviewed #%d", reviewer, pr.Number)
	}
	r.g.DismissReview(t, pr.Number, id)
}

func (r *repo) DeleteBranch(t testing.TB, branch string) { r.g.DeleteBranch(t, branch) }

func (r *repo) Protect(t testing.TB, p forgetest.Protection) {
	r.g.Protect(t, "main", p.Checks, p.Approvals, p.DismissStale)
}

func (r *repo) SetStatus(t testing.TB, sha, context, state string) {
	r.g.SetStatusURL(t, sha, context, state, forgetest.StatusURL(context))
}

func (r *repo) MergesOf(t testing.TB, sha string) int { return r.g.MergesOf(t, sha) }

func TestContract(t *testing.T) {
	forgetest.Run(t, newHarness(t))
}

// TestPolicy runs the merge-policy table on the package's real Gitea (one
// server; the rows that leave main alone share one repository).
func TestPolicy(t *testing.T) {
	forgetest.Policy(t, newHarness(t))
}

// envs is a policy that lets every variable of lookup resolve (the tests'
// own environment; the platform's policy is tested in internal/secret).
func envs(lookup func(string) (string, bool)) *secret.Policy {
	return &secret.Policy{Allow: []string{"env:*"}, LookupEnv: lookup}
}
