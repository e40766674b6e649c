//go:build linux

package runner_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// The merge stage alone, on a real Gitea, with Core on a fake clock: no
// agent session (the test pushes each ticket's branch itself, and the
// pipeline is the one merge stage), so that hours of polling pass in
// moments and every poll is the real flow.merge job calling the real
// Gitea through the counting proxy.

// mergeWorld is a whole Core on a fake clock with the Gitea side of a
// giteaWorld.
type mergeWorld struct {
	giteaSide
	t  testing.TB
	e  *apitest.Env
	fk *clock.Fake
}

func newMergeWorld(t testing.TB, adjust ...func(*config.Config)) *mergeWorld {
	t.Helper()
	fk := clock.NewFake(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	w := &mergeWorld{giteaSide: newGiteaSide(t, fk.Now), t: t, fk: fk}
	dir := t.TempDir()
	w.e = apitest.RunOn(t, storetest.Open(t, "sqlite"), fk, append([]func(*config.Config){func(c *config.Config) {
		c.Storage.Path = dir + "/core.db"
		c.Jobs.Poll.Duration = mergeWorldPoll
	}}, adjust...)...)
	w.e.Org("acme")
	return w
}

// project is a project on a new Gitea repository whose default pipeline
// is one merge stage.
func (w *mergeWorld) project(key string, policy map[string]any, more ...map[string]any) *giteaProject {
	w.t.Helper()
	p := w.giteaSide.project(w.t, w.e, key, policy, more...)
	w.e.Admin(200, "PUT", "/api/v1/projects/"+key+"/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
		"stages": []any{map[string]any{"id": "integrate", "kind": "platform", "action": "merge"}}}})
	return p
}

// ticket creates a ticket, pushes its branch to Gitea (a commit of its
// own) and makes it ready: the scheduler starts its flow, whose merge
// stage opens the pull request. It returns the key and the branch's head.
func (w *mergeWorld) ticket(p *giteaProject) (string, string) {
	w.t.Helper()
	var it struct {
		Key     string
		Version int64
	}
	w.e.Admin(201, "POST", "/api/v1/projects/"+p.Key+"/items", map[string]any{"type": "task", "title": "Change",
		"acceptance_criteria": "it works", "state": "backlog"}).JSON(w.t, &it)
	head := p.Repo.PushBranch(w.t, "ballet/"+it.Key)
	w.e.Admin(200, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": it.Version, "state": "ready"})
	return it.Key, head
}

// flowOf reads key's flow.
func (w *mergeWorld) flowOf(key string) coreFlow {
	w.t.Helper()
	var f coreFlow
	if r := w.e.Do(apitest.BootstrapToken, "GET", "/api/v1/items/"+key+"/flow", nil); r.Status == 200 {
		r.JSON(w.t, &f)
	}
	return f
}

// mergeDue is when the pending flow.merge job runs next (ok false when
// none is pending).
func (w *mergeWorld) mergeDue() (time.Time, bool) {
	rows, err := w.e.Store.Query(context.Background(), `SELECT run_at FROM jobs WHERE kind = 'flow.merge' AND status = 'pending' ORDER BY run_at LIMIT 1`)
	if err != nil {
		w.t.Fatal(err)
	}
	if rows.Len() == 0 {
		return time.Time{}, false
	}
	var ms int64
	if err := rows.Scan(0, &ms); err != nil {
		w.t.Fatal(err)
	}
	return store.Time(ms), true
}

// nextPoll waits until the poll before has finished (the merge job is
// pending again, due later than now), then moves the clock to the job's
// run time, or to until when that comes first. It returns that time, and
// false when the clock stopped at until or no merge job is left.
func (w *mergeWorld) nextPoll(until time.Time) (time.Time, bool) {
	w.t.Helper()
	var due time.Time
	var pending bool
	w.settle("the merge job's poll to finish", func() bool {
		due, pending = w.mergeDue()
		return (pending && due.After(w.fk.Now())) || w.noMergeJob()
	})
	switch {
	case !pending:
		return time.Time{}, false
	case due.After(until):
		w.fk.Advance(until.Sub(w.fk.Now()))
		return until, false
	}
	w.fk.Advance(due.Sub(w.fk.Now()))
	return due, true
}

// settle waits until cond holds, as hang.WaitFor does, moving Core's
// clock on a little where only that lets Core go on:
//
//   - Gitea answers that a pull request is not mergeable while it still
//     checks, and the client reads again after a pause on Core's clock:
//     while a merge check has run for a second of wall time, the clock
//     moves on by that pause (gitea.Options.MergeableWait's default);
//   - a timer the orchestrator sets while the clock moves ends a poll
//     interval after the move: while a merge job has been due for a second
//     of wall time and not run, the clock moves on by [jobs] poll (10 ms
//     here).
func (w *mergeWorld) settle(what string, cond func() bool) {
	w.t.Helper()
	w.await(what, cond, true)
}

// unpolled waits as settle does, but never moves the clock to a due poll:
// only past the Gitea client's mergeability pause of a running check — what
// a webhook-woken check may need (Gitea re-checks now and then), far less
// than the merge stage's shortest poll (5 s).
func (w *mergeWorld) unpolled(what string, cond func() bool) {
	w.t.Helper()
	w.await(what, cond, false)
}

func (w *mergeWorld) await(what string, cond func() bool, polls bool) {
	w.t.Helper()
	var since time.Time
	var stuck string
	hang.WaitFor(w.t, what, func() bool {
		if cond() {
			return true
		}
		due, pending := w.mergeDue()
		now := ""
		switch {
		case w.mergeRunning():
			now = "running"
		case pending && !due.After(w.fk.Now()):
			now = "due"
		}
		switch {
		case now == "" || now != stuck:
			stuck, since = now, time.Now()
		case time.Since(since) > 3*time.Second && now == "running":
			// A check waiting on the clock (the forge's mergeability) is
			// let on; one merely slow on a loaded machine (Gitea taking
			// seconds to answer) must not move the clock towards the
			// poll's schedule: 300 ms per 3 s of wall time.
			w.fk.Advance(300 * time.Millisecond)
			since = time.Now()
		case time.Since(since) > time.Second && polls:
			w.fk.Advance(mergeWorldPoll)
			since = time.Now()
		}
		return false
	})
}

// mergeWorldPoll is the [jobs] poll of a mergeWorld's Core.
const mergeWorldPoll = 10 * time.Millisecond

// mergeRunning: a flow.merge job is running.
func (w *mergeWorld) mergeRunning() bool {
	rows, err := w.e.Store.Query(context.Background(), `SELECT COUNT(*) FROM jobs WHERE kind = 'flow.merge' AND status = 'running'`)
	if err != nil {
		w.t.Fatal(err)
	}
	var n int
	_ = rows.Scan(0, &n)
	return n > 0
}

// noMergeJob: no flow.merge job is pending or running.
func (w *mergeWorld) noMergeJob() bool {
	rows, err := w.e.Store.Query(context.Background(), `SELECT COUNT(*) FROM jobs WHERE kind = 'flow.merge' AND status IN ('pending', 'running')`)
	if err != nil {
		w.t.Fatal(err)
	}
	var n int
	_ = rows.Scan(0, &n)
	return n == 0
}

// onlyOpenPull returns the project's one open pull request on Gitea.
func (w *mergeWorld) onlyOpenPull(p *giteaProject) *gitea.PullRequest {
	w.t.Helper()
	var open []*gitea.PullRequest
	for _, pr := range p.Repo.ListPulls(w.t) {
		if pr.State == gitea.StateOpen {
			open = append(open, pr)
		}
	}
	if len(open) != 1 {
		w.t.Fatalf("%d open pull requests on %s: %s", len(open), p.Repo.FullName(), pullsString(open))
	}
	return open[0]
}

// polls counts the merge checks Ballet made on the project's repository so
// far: each check reads the pull request once.
func (p *giteaProject) polls() int {
	return p.s.calls.count(p.Repo.FullName(), pullReadRE)
}

var pullReadRE = regexp.MustCompile(`^GET /pulls/\d+$`)

// TestGiteaWebhookWakesTheMerge (end to end, f): Gitea delivers its
// webhooks to Core (repository.webhook_secret_ref); Core runs on a fake
// clock that the test never moves once the pull request waits for its
// review, so no merge check can come from polling. The collaborator's
// approval reaches Ballet's merge, and Gitea's merged event the end of the
// stage, by the webhooks alone: the ticket is done, merged once, and the
// checks between the approval and the end are counted.
func TestGiteaWebhookWakesTheMerge(t *testing.T) {
	t.Parallel()
	w := newMergeWorld(t)
	secret := "hook-secret-" + unique()
	p := w.project("PW", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}},
		map[string]any{"webhook_secret_ref": "env:" + coreEnv(t, "HOOK", secret)})
	p.Repo.CreateWebhook(t, w.e.URL+"/api/v1/hooks/gitea/"+p.Key, secret,
		[]string{"pull_request", "pull_request_sync", "pull_request_review_approved", "pull_request_review_rejected", "status"})
	key, head := w.ticket(p)
	w.settle(key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
	pr := w.onlyOpenPull(p)
	// The check that found the review missing has snoozed: it is due
	// later, and from now on the clock stays where it is.
	w.settle("the merge check to snooze", func() bool { due, ok := w.mergeDue(); return ok && due.After(w.fk.Now()) })
	frozen, before := w.fk.Now(), p.polls()

	p.Repo.Review(t, int(pr.Index), w.reviewer, giteatest.Approve, "Ship it.")
	w.unpolled(key+" to be done", func() bool { return w.flowOf(key).Status == "done" })
	if moved := w.fk.Now().Sub(frozen); moved >= 5*time.Second {
		t.Fatalf("the clock moved by %v from %v: a poll, not the webhook, went on", moved, frozen)
	}
	if n := p.Repo.MergesOf(t, head); n != 1 {
		t.Errorf("main merged %s %d times, want once", head, n)
	}
	if prs := p.Repo.ListPulls(t); len(prs) != 1 || !prs[0].HasMerged {
		t.Errorf("pull requests: %s", pullsString(prs))
	}
	t.Logf("merge checks from the approval to the end of the stage: %d, none of them on the poll's schedule", p.polls()-before)
}
