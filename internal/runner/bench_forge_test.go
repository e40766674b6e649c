//go:build linux

package runner_test

import (
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/giteatest"
)

// BenchmarkMergePollingForADay: a pull request waits a day for a review
// while nothing changes. Through the real flow.merge job on Core's fake
// clock and the real Gitea, it reports Ballet's Gitea API calls in the
// first hour, in the last hour (the back-off's steady state) and over the
// day, and the polls (pull request reads) in the last hour.
//
//	BALLET_GITEA=$(scripts/gitea.sh) go test -run '^$' -bench MergePollingForADay -benchtime 1x ./internal/runner/
func BenchmarkMergePollingForADay(b *testing.B) {
	var first, last, day, lastPolls float64
	for range b.N {
		w := newMergeWorld(b) // a Core of its own: the clock moves a day
		p := w.project("PD", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}})
		key, _ := w.ticket(p)
		w.settle(key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
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
// approval; the collaborator approves; Ballet merges. It reports the time
// from the approval to Ballet's merge call, p50 and p99:
//
//   - poll: the merge job's polling alone; the approval comes after a
//     delay spread from a minute to a day (log-uniform, the same sequence
//     every run), and the times are on Core's clock, whose polls the
//     benchmark steps through;
//
//   - webhook: Gitea's webhook delivers the approval to Core, whose clock
//     stands still; the times are wall-clock milliseconds.
//
//     BALLET_GITEA=$(scripts/gitea.sh) go test -run '^$' -bench ApprovalToMerge -benchtime 20x ./internal/runner/
func BenchmarkApprovalToMerge(b *testing.B) {
	policy := map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}}
	b.Run("poll", func(b *testing.B) {
		w := newMergeWorld(b)
		p := w.project("PM", policy)
		var lat []time.Duration
		for i := range b.N {
			key, _ := w.ticket(p)
			w.settle(key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
			pr := w.onlyOpenPull(p)
			frac := math.Mod(float64(i)*0.6180339887498949, 1)
			approveAt := w.fk.Now().Add(time.Duration(float64(time.Minute) * math.Pow(24*60, frac)))
			for {
				if _, ok := w.nextPoll(approveAt); !ok {
					break
				}
			}
			p.Repo.Review(b, int(pr.Index), w.reviewer, giteatest.Approve, "")
			approved := w.fk.Now()
			var merged forgeCall
			for merged.At.IsZero() {
				if _, ok := w.nextPoll(approved.Add(48 * time.Hour)); !ok {
					b.Fatalf("%s: no merge within two days of the approval", key)
				}
				w.settle(key+"'s check", func() bool { due, ok := w.mergeDue(); return (ok && due.After(w.fk.Now())) || w.noMergeJob() })
				merged = p.mergeCall(approved)
			}
			w.finish(key)
			lat = append(lat, merged.At.Sub(approved))
		}
		b.ReportMetric(percentile(lat, 0.50).Seconds(), "approval-merge-p50-s")
		b.ReportMetric(percentile(lat, 0.99).Seconds(), "approval-merge-p99-s")
	})
	b.Run("webhook", func(b *testing.B) {
		w := newMergeWorld(b)
		secret := "hook-secret-" + unique()
		p := w.project("PH", policy, map[string]any{"webhook_secret_ref": "env:" + coreEnv(b, "HOOK", secret)})
		p.Repo.CreateWebhook(b, w.e.URL+"/api/v1/hooks/gitea/"+p.Key, secret, []string{"pull_request", "pull_request_review_approved"})
		var lat []time.Duration
		for range b.N {
			key, _ := w.ticket(p)
			w.settle(key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
			w.settle(key+"'s check to snooze", func() bool { due, ok := w.mergeDue(); return ok && due.After(w.fk.Now()) })
			pr := w.onlyOpenPull(p)
			approved := time.Now()
			p.Repo.Review(b, int(pr.Index), w.reviewer, giteatest.Approve, "")
			var merged forgeCall
			// The merge call made after the approval, by wall time: Core's
			// clock may still read the previous ticket's merge time.
			w.unpolled(key+"'s merge", func() bool { merged = p.mergeCallAfter(approved); return !merged.At.IsZero() })
			w.finish(key)
			lat = append(lat, merged.Real.Sub(approved))
		}
		b.ReportMetric(ms(percentile(lat, 0.50)), "approval-merge-p50-ms")
		b.ReportMetric(ms(percentile(lat, 0.99)), "approval-merge-p99-ms")
	})
}

// BenchmarkForgeCallsPerMergedTicket counts Ballet's Gitea API calls for a
// ticket whose pull request is approved (and its required check passed)
// as soon as Ballet opened it: open, wait for the review, merge, see it
// merged — the fewest a merged ticket costs; every further check while it
// waits costs what BenchmarkMergePollingForADay reports.
//
//	BALLET_GITEA=$(scripts/gitea.sh) go test -run '^$' -bench ForgeCallsPerMergedTicket -benchtime 10x ./internal/runner/
func BenchmarkForgeCallsPerMergedTicket(b *testing.B) {
	w := newMergeWorld(b)
	p := w.project("PC", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{"ci/test"}})
	calls := 0
	for range b.N {
		before := len(w.calls.of(p.Repo.FullName()))
		key, head := w.ticket(p)
		p.Repo.SetStatus(b, head, "ci/test", "success")
		w.settle(key+" to wait for a review", func() bool { return w.flowOf(key).Waiting == "review" })
		p.Repo.Review(b, int(w.onlyOpenPull(p).Index), w.reviewer, giteatest.Approve, "")
		w.finish(key)
		calls += len(w.calls.of(p.Repo.FullName())) - before
	}
	b.ReportMetric(float64(calls)/float64(b.N), "calls/merged-ticket")
}

var mergeCallRE = regexp.MustCompile(`^POST /api/v1/repos/[^/]+/[^/]+/pulls/\d+/merge$`)

// mergeCall is Ballet's first merge call on the project's repository at or
// after since (Core's clock); zero when there is none.
func (p *giteaProject) mergeCall(since time.Time) forgeCall {
	for _, c := range p.s.calls.of(p.Repo.FullName()) {
		if mergeCallRE.MatchString(c.Method+" "+c.Path) && !c.At.Before(since) {
			return c
		}
	}
	return forgeCall{}
}

// mergeCallAfter is the first merge call made after wall time t.
func (p *giteaProject) mergeCallAfter(t time.Time) forgeCall {
	for _, c := range p.s.calls.of(p.Repo.FullName()) {
		if mergeCallRE.MatchString(c.Method+" "+c.Path) && c.Real.After(t) {
			return c
		}
	}
	return forgeCall{}
}

// finish steps the clock through key's merge checks until its flow is
// done.
func (w *mergeWorld) finish(key string) {
	w.t.Helper()
	for w.flowOf(key).Status != "done" {
		if _, ok := w.nextPoll(w.fk.Now().Add(48 * time.Hour)); !ok && w.flowOf(key).Status != "done" {
			w.t.Fatalf("%s: flow %+v", key, w.flowOf(key))
		}
	}
}
