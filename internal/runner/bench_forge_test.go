//go:build linux

package runner_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/ballet/ballet/internal/apitest"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/giteatest"
	"github.com/ballet/ballet/internal/hang"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
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
	}}, adjust...)...)
	w.e.Org("acme")
	return w
}

// project is a project on a new Gitea repository whose default pipeline
// is one merge stage.
func (w *mergeWorld) project(key string, policy map[string]any) *giteaProject {
	w.t.Helper()
	p := w.giteaSide.project(w.t, w.e, key, policy)
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

// nextPoll waits until the merge job is pending again (the poll before
// has finished), then moves the clock to its run time (not beyond until)
// and returns that time. ok is false when the job runs after until (the
// clock then stands at until) or no merge job is pending any more.
func (w *mergeWorld) nextPoll(until time.Time) (time.Time, bool) {
	w.t.Helper()
	var due time.Time
	var pending bool
	hang.WaitFor(w.t, "the merge job to be pending", func() bool {
		due, pending = w.mergeDue()
		return pending || w.noMergeJob()
	})
	if !pending {
		return time.Time{}, false
	}
	if due.After(until) {
		w.fk.Advance(until.Sub(w.fk.Now()))
		return until, false
	}
	if d := due.Sub(w.fk.Now()); d > 0 {
		w.fk.Advance(d)
	}
	return due, true
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

var pullReadRE = regexp.MustCompile(`^GET /pulls/\d+$`)

// BenchmarkMergePollingForADay: a pull request waits a day for a review
// while nothing changes. Through the real flow.merge job on Core's fake
// clock and the real Gitea, it reports Ballet's Gitea API calls in the
// first hour, in the last hour (the back-off's steady state) and over the
// day, and the polls (pull request reads) in the last hour.
//
//	BALLET_GITEA=$(scripts/gitea.sh) go test -run '^$' -bench MergePollingForADay -benchtime 1x ./internal/runner/
func BenchmarkMergePollingForADay(b *testing.B) {
	w := newMergeWorld(b)
	var first, last, day, lastPolls float64
	for i := range b.N {
		p := w.project(fmt.Sprintf("PD%c", 'A'+i%26), map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}})
		key, _ := w.ticket(p)
		hang.WaitFor(b, key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
		start := w.fk.Now()
		hourly := make([]int, 24)
		for {
			if _, ok := w.nextPoll(start.Add(24 * time.Hour)); !ok {
				break
			}
		}
		for _, c := range w.calls.of(p.Repo.FullName()) {
			if h := int(c.At.Sub(start) / time.Hour); h >= 0 && h < 24 {
				hourly[h]++
			}
		}
		polls := 0
		for _, c := range w.calls.of(p.Repo.FullName()) {
			if c.At.Sub(start) >= 23*time.Hour && pullReadRE.MatchString(c.Method+" "+c.Path[len("/api/v1/repos/"+p.Repo.FullName()):]) {
				polls++
			}
		}
		first += float64(hourly[0])
		last += float64(hourly[23])
		lastPolls += float64(polls)
		for _, n := range hourly {
			day += float64(n)
		}
		if f := w.flowOf(key); f.Waiting != "review" {
			b.Fatalf("after a day: flow %+v", f)
		}
	}
	n := float64(b.N)
	b.ReportMetric(first/n, "calls-first-hour")
	b.ReportMetric(last/n, "calls-last-hour")
	b.ReportMetric(lastPolls/n, "polls-last-hour")
	b.ReportMetric(day/n, "calls/day")
}

// BenchmarkApprovalToMerge: a pull request waits for its one required
// approval; the reviewer approves after a delay spread from a minute to a
// day (the same sequence every run); Ballet merges at its next poll. It
// reports, on Core's clock, the time from the approval to Ballet's merge
// call (p50, p99), and the API calls per merged ticket.
//
//	BALLET_GITEA=$(scripts/gitea.sh) go test -run '^$' -bench ApprovalToMerge -benchtime 20x ./internal/runner/
func BenchmarkApprovalToMerge(b *testing.B) {
	w := newMergeWorld(b)
	p := w.project("PM", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}})
	var lat []time.Duration
	calls := 0
	for i := range b.N {
		before := len(w.calls.of(p.Repo.FullName()))
		key, _ := w.ticket(p)
		hang.WaitFor(b, key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
		pr := w.onlyOpenPull(p)
		// A delay between a minute and a day, log-uniform, from a
		// low-discrepancy sequence: the same delays every run.
		frac := float64(i)*0.6180339887498949 - float64(int(float64(i)*0.6180339887498949))
		delay := time.Duration(float64(time.Minute) * math.Pow(24*60, frac))
		approveAt := w.fk.Now().Add(delay)
		for {
			if _, ok := w.nextPoll(approveAt); !ok {
				break
			}
		}
		p.Repo.Review(b, int(pr.Index), w.reviewer, giteatest.Approve, "")
		approved := w.fk.Now()
		var merged time.Time
		for merged.IsZero() {
			if _, ok := w.nextPoll(approved.Add(48 * time.Hour)); !ok {
				b.Fatalf("%s: no merge within two days of the approval", key)
			}
			hang.WaitFor(b, key+"'s poll", func() bool { _, pending := w.mergeDue(); return pending || w.noMergeJob() })
			for _, c := range w.calls.of(p.Repo.FullName()) {
				if c.Method == "POST" && mergeCallRE.MatchString(c.Path) && !c.At.Before(approved) {
					merged = c.At
				}
			}
		}
		hang.WaitFor(b, key+" done", func() bool {
			if w.flowOf(key).Status == "done" {
				return true
			}
			if due, ok := w.mergeDue(); ok && due.After(w.fk.Now()) {
				w.fk.Advance(due.Sub(w.fk.Now()))
			}
			return false
		})
		lat = append(lat, merged.Sub(approved))
		calls += len(w.calls.of(p.Repo.FullName())) - before
	}
	b.ReportMetric(percentile(lat, 0.50).Seconds(), "approval-merge-p50-s")
	b.ReportMetric(percentile(lat, 0.99).Seconds(), "approval-merge-p99-s")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/merged-ticket")
}

var mergeCallRE = regexp.MustCompile(`/pulls/\d+/merge$`)

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
