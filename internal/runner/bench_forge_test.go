//go:build linux

package runner_test

import (
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/giteatest"
	"github.com/ballet/ballet/internal/hang"
)

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
