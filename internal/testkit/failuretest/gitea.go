package failuretest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge/gitea"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

// OnGitea is the project whose repository is on a real Gitea (see
// giteaSide): Ballet opens each ticket's pull request there, reads its
// state (commit statuses, reviews) and merges it, while the harness kills
// Core around every one of those calls. The harness plays CI (the required
// check ciContext) and the reviewer (a second Gitea user with write access);
// main is protected on Gitea with the same rules, so Gitea itself refuses a
// premature merge.
const OnGitea = "GTA"

// giteaTickets is how many tickets project OnGitea gets: enough that every
// forge call of the merge stage is passed under kills.
const giteaTickets = 10

// ciContext is the required check the harness reports as CI would.
const ciContext = "ci"

// giteaCredEnv names the variable in Core's environment holding Ballet's
// Gitea token (the project's repository.credentials_ref is env:giteaCredEnv).
const giteaCredEnv = "ACME_FAILURETEST_GITEA_TOKEN"

// giteaHookEnv names the variable in Core's environment holding the Gitea
// project's webhook secret (its repository.webhook_secret_ref), which
// giteaHookSecret is.
const (
	giteaHookEnv    = "ACME_FAILURETEST_GITEA_HOOK"
	giteaHookSecret = "failuretest-hook-secret"
)

// CIFails reports whether the harness's CI fails the first head of a
// ticket's pull request that it sees (so the merge stage fails and the
// ticket loops back to implement); every later head passes.
func CIFails(number int64) bool { return number%5 == 2 }

// The Gitea client's fault points (internal/forge/gitea), around every call
// of the merge stage.
var giteaPoints = []string{gitea.FaultCreateBefore, gitea.FaultCreateAfter, gitea.FaultStateAfter, gitea.FaultMergeBefore, gitea.FaultMergeAfter}

// giteaPR is a pull request as Gitea's API answers.
type giteaPR struct {
	Number         int    `json:"number"`
	State          string `json:"state"` // open or closed
	Merged         bool   `json:"merged"`
	MergeCommitSHA string `json:"merge_commit_sha"`
	Body           string `json:"body"`
	Head           struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// key is the ticket of a pull request's head branch ballet/KEY ("" for
// other branches).
func (p giteaPR) key() string {
	k, _ := strings.CutPrefix(p.Head.Ref, "ballet/")
	if k == p.Head.Ref {
		return ""
	}
	return k
}

// giteaSide is the suite's repository on Gitea and the people around it:
// its owner (Ballet's account, whose token Core gets through
// repository.credentials_ref) and the reviewer (a collaborator with write
// access, whose approval counts).
type giteaSide struct {
	repo     *giteatest.Repo
	reviewer giteatest.User
	pushURL  string // the clone URL with the owner's token, for git
	// changed is set by Gitea's webhook deliveries to the harness (a pull
	// request opened, pushed to, closed or merged): the pull requests are
	// listed again only then, or after prsStale (a delivery can be lost).
	changed atomic.Bool
}

// prsStale is how long the harness trusts its list of pull requests
// without a delivery from Gitea saying one changed.
const prsStale = 3 * time.Second

// listen adds a webhook of the repository that tells the harness (an
// HTTP server on 127.0.0.1) when a pull request changed.
func (g *giteaSide) listen(t testing.TB) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		g.changed.Store(true)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	g.repo.CreateWebhook(t, srv.URL+"/gitea", "harness", []string{"pull_request", "pull_request_sync"})
	g.changed.Store(true)
}

// newGiteaSide seeds a repository for one run of the suite on srv: Ballet's
// account owns it, a reviewer has write access, and main is protected (one
// approval, ciContext passed) and allows pull requests to be marked merged
// by hand, as docs/forges.md advises: a merge cut short by a Core kill
// leaves Gitea's merge commit on main and the pull request open, and Ballet
// marks it merged.
func newGiteaSide(t testing.TB, srv *giteatest.Server) (*giteaSide, error) {
	owner := srv.CreateUser(t, "ballet")
	g := &giteaSide{repo: srv.CreateRepo(t, owner), reviewer: srv.CreateUser(t, "reviewer")}
	srv.AddCollaborator(t, g.repo, g.reviewer)
	g.repo.ProtectBranch(t, "main", []string{ciContext}, 1)
	g.repo.AllowManualMerge(t)
	var err error
	g.pushURL, err = withToken(g.repo.CloneURL, owner.Name, owner.Token)
	return g, err
}

// pulls lists every pull request of the repository, open and closed.
func (g *giteaSide) pulls(t testing.TB) []giteaPR {
	var out []giteaPR
	for _, p := range g.repo.ListPulls(t) {
		pr := giteaPR{Number: int(p.Index), State: string(p.State), Merged: p.HasMerged, Body: p.Body}
		if p.MergedCommitID != nil {
			pr.MergeCommitSHA = *p.MergedCommitID
		}
		if p.Head != nil {
			pr.Head.Ref, pr.Head.SHA = p.Head.Ref, p.Head.Sha
		}
		if p.Base != nil {
			pr.Base.Ref = p.Base.Ref
		}
		out = append(out, pr)
	}
	return out
}

// withToken is a clone URL with a token as its user info, for git.
func withToken(cloneURL, user, token string) (string, error) {
	u, err := url.Parse(cloneURL)
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(user, token)
	return u.String(), nil
}

// forgeFaultWait is how long an armed point of the Gitea client may take
// to fire: the merge stage checks every 5 s or more, at once on the
// repository's webhook (a review, a CI status), and an "after" point fires
// only once Gitea answered — which on a loaded CI machine took over 30 s
// for a merge (Gitea's own log: every write 3–4 s). At 20 s the points
// after creating and after merging were given up before Gitea answered,
// four turns each, and a run on rqlite ended with neither fired
// (enough-happened-on-gitea).
const forgeFaultWait = 60 * time.Second

// isForgePoint reports whether an armed fault spec is one of the Gitea
// client's points.
func isForgePoint(spec string) bool { return strings.HasPrefix(spec, "gitea.") }

func isMergePoint(spec string) bool { return strings.HasPrefix(spec, "gitea.merge.") }

// pointOf is the point of a fault spec (without its hit count).
func pointOf(spec string) string {
	if i := strings.LastIndexByte(spec, ':'); i > 0 {
		return spec[:i]
	}
	return spec
}

// giteaPlan lists the Gitea client's points to arm, two rounds of each,
// each armed only when the tickets are where it will be passed soon
// (forgeReady).
func (s *suite) giteaPlan() []string {
	var plan []string
	for range 2 {
		for _, p := range giteaPoints {
			k := 1
			if p == gitea.FaultStateAfter {
				k += s.rng.IntN(3)
			}
			plan = append(plan, fmt.Sprintf("%s:%d", p, k))
		}
	}
	return plan
}

// maxForgeRetries bounds the extra turns of the Gitea client's points that
// did not fire when armed.
const maxForgeRetries = 3

// giteaPointMissing says whether one of the Gitea client's points never
// fired (checkGiteaHappened wants each once).
func (s *suite) giteaPointMissing() bool {
	return slices.ContainsFunc(giteaPoints, func(p string) bool { return s.forgeFired[p] == 0 })
}

// nextForgePoint takes the first point of the plan that is ready to be
// passed ("" when none is).
func (s *suite) nextForgePoint() string {
	for i, p := range s.forgePlan {
		if s.forgeReady(pointOf(p)) {
			s.forgePlan = slices.Delete(s.forgePlan, i, i+1)
			return p
		}
	}
	return ""
}

// forgeReadyAny reports whether some point of the plan is ready.
func (s *suite) forgeReadyAny() bool {
	return slices.ContainsFunc(s.forgePlan, func(p string) bool { return s.forgeReady(pointOf(p)) })
}

// forgeReady says whether Core will soon pass point, from the last polls:
// creating a pull request when a ticket verifies or merges without one;
// reading a state when one is in its merge stage; merging when one waits
// for nothing but the approval the harness holds back (see mayApprove).
func (s *suite) forgeReady(point string) bool {
	for k, f := range s.flows {
		if projectOf(k) != OnGitea || (f.Status != "running" && f.Status != "waiting") {
			continue
		}
		pr, has := s.prs[k]
		switch {
		case strings.HasPrefix(point, "gitea.create_pr."):
			if (f.Stage == "verify" || f.Stage == "integrate") && !has {
				return true
			}
		case point == gitea.FaultStateAfter:
			if f.Stage == "integrate" {
				return true
			}
		case strings.HasPrefix(point, "gitea.merge."):
			if f.Stage == "integrate" && has && pr.State == "open" && s.ciSet[pr.Head.SHA] == "success" && !s.approved[k+"@"+pr.Head.SHA] {
				return true
			}
		}
	}
	return false
}

// holdsMerges: merge points are still to be armed, so the reviewer
// approves only while one is armed.
func (s *suite) holdsMerges() bool {
	return s.forgingAt(time.Now()) && slices.ContainsFunc(s.forgePlan, isMergePoint)
}

// mayApprove says whether the reviewer approves a ready pull request now:
// always once no merge point is left to arm; before, one approval per Core
// start with a merge point armed, so that Ballet's merge passes it.
func (s *suite) mayApprove() bool {
	return !s.holdsMerges() || (isMergePoint(s.core.armed()) && s.approvedArm == 0)
}

// playForge plays CI and the reviewer on Gitea for the tickets in their
// merge stage: it reports the required check on each new head of an open
// pull request (a failure on the first head of a CIFails ticket), and
// approves a head that passed when mayApprove.
func (s *suite) playForge(now time.Time) {
	if !s.gitea.changed.Swap(false) && now.Sub(s.prsRead) < prsStale {
		return
	}
	prs := s.gitea.pulls(s.t) // Gitea is never killed: an error is the harness's
	s.prsRead = now
	latest := map[string]giteaPR{} // the open one, else the newest
	for _, p := range prs {
		k := p.key()
		if k == "" {
			continue
		}
		if cur, ok := latest[k]; !ok || (cur.State != "open" && (p.State == "open" || p.Number > cur.Number)) {
			latest[k] = p
		}
	}
	s.prs = latest
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, f := latest[k], s.flows[k]
		if p.State != "open" || f.Stage != "integrate" || (f.Status != "running" && f.Status != "waiting") {
			continue
		}
		sha := p.Head.SHA
		if _, done := s.ciSet[sha]; !done {
			state := "success"
			if CIFails(s.byKey[k].Number) && s.ciFailedIter[k] == 0 {
				state, s.ciFailedIter[k] = "failure", f.Iteration
			}
			s.gitea.repo.SetStatus(s.t, sha, ciContext, state)
			s.ciSet[sha] = state
			s.logf("gitea: CI %s on %s (pull request #%d, head %s, iteration %d)", state, k, p.Number, sha, f.Iteration)
		}
		if s.ciSet[sha] == "success" && !s.approved[k+"@"+sha] && s.mayApprove() {
			s.gitea.repo.Review(s.t, p.Number, s.gitea.reviewer, giteatest.Approve, "approved by the failure suite")
			s.approved[k+"@"+sha] = true
			s.approvedArm++
			s.logf("gitea: approved %s (pull request #%d, head %s) with %q armed", k, p.Number, sha, s.core.armed())
		}
	}
}
