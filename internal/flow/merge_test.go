package flow_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// mergePipeline (ticket type bug): a human approval, then the merge, whose
// failure goes back to the approval.
var mergePipeline = map[string]any{"stages": []any{
	map[string]any{"id": "prep", "kind": "human"},
	map[string]any{"id": "ship", "kind": "platform", "action": "merge", "next": map[string]any{"failed": "prep"}},
}}

// toShip starts a bug ticket and brings it to its merge stage (a merge
// check pending); it returns the ticket's key.
func (w *world) toShip() string {
	w.t.Helper()
	key := w.ticket("bug")
	w.mustStep(flow.JobEnter, key)
	w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/approve", nil)
	w.mustStep(flow.JobEnter, key)
	w.wantFlow(key, "ship it=1 step=2 running/checks")
	return key
}

// check runs key's merge check and wants it to snooze for d (0: to end
// without a snooze).
func (w *world) check(key string, d time.Duration) {
	w.t.Helper()
	err := w.step(flow.JobMerge, key)
	switch {
	case d == 0 && err != nil:
		w.t.Fatalf("merge check of %s: %v, want it to end", key, err)
	case d != 0 && (err == nil || err.Error() != job.Snooze(d).Error()):
		w.t.Fatalf("merge check of %s: %v, want it to check again after %s", key, err, d)
	}
}

var openPR = forge.State{BranchPushed: true, Open: true, HeadSHA: "head-1", Checks: forge.ChecksNone}

// TestMergeStageWaits: a merge stage waits for what the policy and the
// forge say — a human merge (slot freed), checks (slot kept), a review —
// records the pull request, records each change of what it waits for once,
// checks less often the longer it waits, and ends done when merged.
func TestMergeStageWaits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		w.forge.set(func(f *scriptForge) { f.st = openPR })
		key := w.toShip()

		seq := w.seq()
		w.check(key, 5*time.Second)
		f := w.wantFlow(key, "ship it=1 step=2 waiting/merge")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.waiting")
		wantPayload(t, evs[0], map[string]any{"waiting": "merge", "step": 2,
			"reason": "waiting for a human to merge ballet/" + key + " into main: the merge policy is manual"})
		want := forge.PullRequest{Number: 7, URL: "https://forge.invalid/pr/7", Branch: "ballet/" + key, Base: "main", HeadSHA: "head-1"}
		if f.PullRequest == nil || *f.PullRequest != want {
			t.Fatalf("recorded pull request %+v, want %+v (with the head the forge reported)", f.PullRequest, want)
		}
		if pr, ok := evs[0].P["pull_request"].(map[string]any); !ok || pr["head_sha"] != "head-1" {
			t.Fatalf("the event's pull request: %v", evs[0].P["pull_request"])
		}
		seq = w.seq()
		w.check(key, 5*time.Second) // the same: nothing to record
		wantTypes(t, w.since(seq))

		// Twenty minutes in, checks run: the flow holds its slot again.
		w.clk.Advance(20 * time.Minute)
		w.forge.set(func(f *scriptForge) { f.st.Checks, f.st.PendingChecks = forge.ChecksPending, []string{"ci"} })
		seq = w.seq()
		w.check(key, 2*time.Minute)
		w.wantFlow(key, "ship it=1 step=2 running/checks")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.waiting")
		wantPayload(t, evs[0], map[string]any{"waiting": "checks", "reason": "waiting for checks: ci"})

		// Checks passed, a review is required.
		w.patchProject(map[string]any{"merge_policy": map[string]any{"mode": "manual", "required_approvals": 1}})
		w.forge.set(func(f *scriptForge) { f.st.Checks, f.st.PendingChecks = forge.ChecksSuccess, nil })
		w.clk.Advance(2 * time.Hour)
		w.check(key, 5*time.Minute)
		w.wantFlow(key, "ship it=1 step=2 waiting/review")

		// Merged: done, and the ticket with it.
		w.forge.set(func(f *scriptForge) { f.st.Open, f.st.Merged = false, true })
		seq = w.seq()
		w.check(key, 0)
		f = w.wantFlow(key, "ship it=1 step=2 done/")
		w.wantTicket(key, "done")
		evs = w.since(seq)
		wantTypes(t, evs, "flow.done", "ticket.state_changed")
		wantPayload(t, evs[0], map[string]any{"outcome": "done", "report": "the branch ballet/" + key + " was merged into main"})
		if len(w.pending(&f)) != 0 || len(w.forge.mergeCalls()) != 0 {
			t.Fatalf("after the merge: jobs %v, Ballet merged %v", jobKeys(w.pending(&f)), w.forge.mergeCalls())
		}
		w.replay(flow.JobMerge, map[string]any{"flow_id": f.ID, "step": 2, "entered_at": 0})
	})
}

// TestMergeStageFails: a failing pull request, a branch never pushed and a
// project without a repository end the stage failed, which here goes back
// to the first stage in a new iteration, with the reason as the report; a
// branch deleted after it was seen is judged by the head recorded.
func TestMergeStageFails(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		for _, c := range []struct {
			name   string
			set    func(f *scriptForge)
			report string
		}{
			{"failing checks", func(f *scriptForge) {
				f.st = openPR
				f.st.Checks, f.st.FailingChecks = forge.ChecksFailure, []string{"ci"}
			}, "The merge stage failed: checks failed: ci.\nPull request: https://forge.invalid/pr/7 (#7, ballet/%s into main, head head-1).\n" +
				"Failing checks (read their output, fix the cause on the branch and push):\n- ci\n"},
			{"never pushed", func(f *scriptForge) { f.notPushed = true }, "The merge stage failed: the branch ballet/%s was never pushed.\n" +
				"Nothing was pushed to ballet/%s. Commit the work on that branch and push it.\n"},
		} {
			w.forge.set(func(f *scriptForge) { f.zero(); c.set(f) })
			key := w.toShip()
			seq := w.seq()
			w.check(key, 0)
			f := w.wantFlow(key, "prep it=2 step=3 running/")
			evs := w.since(seq)
			wantTypes(t, evs, "flow.stage_finished")
			report := strings.ReplaceAll(c.report, "%s", key)
			wantPayload(t, evs[0], map[string]any{"outcome": "failed", "report": report, "next": "prep", "next_iteration": 2, "step": 2})
			if got := jobKeys(w.pending(&f)); len(got) != 1 || got[0] != fmt.Sprintf("flow.enter flow:%s:enter:3", f.ID) {
				t.Fatalf("%s: jobs %v", c.name, got)
			}
		}

		// Seen open, then the branch is gone: judged by the recorded head.
		w.forge.set(func(f *scriptForge) { f.zero(); f.st = openPR })
		key := w.toShip()
		w.check(key, 5*time.Second)
		w.forge.set(func(f *scriptForge) { f.notPushed, f.st.Open, f.st.Merged, f.states = true, false, true, nil })
		w.check(key, 0)
		w.wantFlow(key, "ship it=1 step=2 done/")
		if st := w.forge.stateCalls(); len(st) != 1 || st[0].HeadSHA != "head-1" {
			t.Fatalf("the gone branch was judged by %+v, want the recorded pull request", st)
		}

		// No repository to merge into.
		key = w.toShip()
		w.patchProject(map[string]any{"repository": nil})
		seq := w.seq()
		w.check(key, 0)
		w.wantFlow(key, "prep it=2 step=3 running/")
		wantPayload(t, w.since(seq)[0], map[string]any{"outcome": "failed", "report": "the project has no repository to merge into"})
	})
}

// TestBalletMerges: with the auto policy on a forge that merges, Ballet
// merges the head the forge reported — once — and the next check sees it
// merged; a merge that does not go through waits; while the project or the
// platform is paused, nothing is merged and the flow waits for the resume.
func TestBalletMerges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		w.patchProject(map[string]any{"merge_policy": map[string]any{"mode": "auto"}})
		ready := openPR
		ready.HeadSHA, ready.Mergeable = "head-2", func() *bool { b := true; return &b }()
		w.forge.set(func(f *scriptForge) { f.st, f.canMerge = ready, true })

		key := w.toShip()
		seq := w.seq()
		w.check(key, 5*time.Second)
		w.wantFlow(key, "ship it=1 step=2 running/checks")
		merges := w.forge.mergeCalls()
		if len(merges) != 1 || merges[0].HeadSHA != "head-2" || merges[0].Branch != "ballet/"+key || merges[0].Base != "main" {
			t.Fatalf("Merge calls %+v, want one of ballet/%s at head-2", merges, key)
		}
		evs := w.since(seq)
		wantTypes(t, evs, "flow.waiting")
		wantPayload(t, evs[0], map[string]any{"waiting": "checks", "reason": "the branch ballet/" + key + " is ready: merging it into main"})
		w.forge.set(func(f *scriptForge) { f.st.Open, f.st.Merged = false, true })
		w.check(key, 0)
		w.wantFlow(key, "ship it=1 step=2 done/")
		if n := len(w.forge.mergeCalls()); n != 1 {
			t.Fatalf("%d merges of one ticket", n)
		}

		// The forge refuses: the stage keeps checking.
		w.forge.set(func(f *scriptForge) { f.st, f.merges, f.mergeErr = ready, nil, forge.ErrNotMergeable })
		key = w.toShip()
		seq = w.seq()
		w.check(key, 5*time.Second)
		w.wantFlow(key, "ship it=1 step=2 running/checks")
		if r, _ := w.since(seq)[0].P["reason"].(string); !strings.HasPrefix(r, "the merge did not go through yet: ") {
			t.Fatalf("reason %q", r)
		}
		w.forge.set(func(f *scriptForge) { f.mergeErr = nil })
		w.check(key, 5*time.Second) // merged now: the next check sees it
		if n := len(w.forge.mergeCalls()); n != 2 {
			t.Fatalf("%d merge attempts, want 2", n)
		}
		w.forge.set(func(f *scriptForge) { f.st.Open, f.st.Merged = false, true })
		w.check(key, 0)

		// Paused (the project, then the platform): no merge.
		for _, pause := range []struct{ on, off func() }{
			{func() { w.patchProject(map[string]any{"paused": true}) }, func() { w.patchProject(map[string]any{"paused": false}) }},
			{func() { w.Admin(200, "POST", "/api/v1/platform/pause", nil) }, func() { w.Admin(200, "POST", "/api/v1/platform/resume", nil) }},
		} {
			w.forge.set(func(f *scriptForge) { f.st, f.merges = ready, nil })
			key = w.toShip()
			pause.on()
			seq = w.seq()
			w.check(key, 0)
			w.wantFlow(key, "ship it=1 step=2 waiting/pause")
			evs = w.since(seq)
			wantTypes(t, evs, "flow.waiting")
			wantPayload(t, evs[0], map[string]any{"waiting": "pause", "reason": "the pull request is ready, but merging waits for the pause to end"})
			if m := w.forge.mergeCalls(); len(m) != 0 {
				t.Fatalf("merged while paused: %+v", m)
			}
			for _, j := range w.pending(nil) {
				if j.Kind == flow.JobKill {
					w.mustStep(flow.JobKill, "")
				}
			}
			pause.off()
			w.mustStep(flow.JobRelease, "")
			w.mustStep(flow.JobEnter, key)
			w.wantFlow(key, "ship it=1 step=3 running/checks")
			w.check(key, 5*time.Second)
			if m := w.forge.mergeCalls(); len(m) != 1 {
				t.Fatalf("after the resume: merges %+v, want one", m)
			}
			w.forge.set(func(f *scriptForge) { f.st.Open, f.st.Merged = false, true })
			w.check(key, 0)
		}
	})
}

// TestMergePoll: the merge stage checks every tenth of the time it has
// waited, at least every 5 s and at most every 5 min.
func TestMergePoll(t *testing.T) {
	for waited, want := range map[time.Duration]time.Duration{
		0: 5 * time.Second, 49 * time.Second: 5 * time.Second, 51 * time.Second: 5100 * time.Millisecond,
		20 * time.Minute: 2 * time.Minute, 50 * time.Minute: 5 * time.Minute, 10 * time.Hour: 5 * time.Minute,
	} {
		if got := flow.MergePoll(waited); got != want {
			t.Errorf("after %s: every %s, want %s", waited, got, want)
		}
	}
}

// TestMergeFollowsItsPullRequest: the first check of a merge stage's entry
// finds or opens the pull request (title "KEY: title", a body with Ballet's
// marker naming the ticket and the flow, the project's API base); once the
// flow recorded it, the checks read that pull request's state only, so one
// a person closed fails the stage instead of a new one being opened. A
// check that failed before recording finds it again (adopted, never a
// second), and a later entry of the stage finds it afresh.
func TestMergeFollowsItsPullRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		w.patchProject(map[string]any{"repository": map[string]any{"forge": "gitea", "url": "https://gitea.example.com/acme/app.git",
			"api_url": "https://gitea.example.com/api/v1"}})
		w.forge.set(func(f *scriptForge) { f.st = openPR; f.stateErr = errors.New("502 Bad Gateway") })
		key := w.toShip()
		f := w.flow(key)

		// The forge fails after the pull request was found: an error (the
		// job's backoff), nothing recorded.
		if err := w.step(flow.JobMerge, key); err == nil || job.IsSnooze(err) || !strings.Contains(err.Error(), "502") {
			t.Fatalf("a forge error: %v, want it returned", err)
		}
		if w.flow(key).PullRequest != nil {
			t.Fatal("recorded a pull request whose state was never read")
		}
		w.exec(`UPDATE jobs SET status = 'pending' WHERE kind = ? AND dedupe_key = ?`, flow.JobMerge, "flow:"+f.ID+":merge:2") // the retry
		w.forge.set(func(f *scriptForge) { f.stateErr = nil })
		w.check(key, 5*time.Second)
		w.wantFlow(key, "ship it=1 step=2 waiting/merge")
		w.forge.set(func(fg *scriptForge) {
			if fg.ensures != 2 || len(fg.titles) != 2 || fg.titles[1] != key+": ticket 1" {
				t.Fatalf("Ensure calls %d, titles %q", fg.ensures, fg.titles)
			}
			if tk, fl, ok := forge.ParseMarker(fg.bodies[1]); !ok || tk != key || fl != f.ID {
				t.Errorf("body marker %q %q %v in %q", tk, fl, ok, fg.bodies[1])
			}
			for _, r := range fg.repos {
				if r.APIURL != "https://gitea.example.com/api/v1" || r.URL != "https://gitea.example.com/acme/app.git" {
					t.Fatalf("a call with the repository %+v", r)
				}
			}
		})

		// Recorded: the checks read that one, never Ensure again.
		for range 3 {
			w.check(key, 5*time.Second)
		}
		if e, st, _, _ := w.forge.calls(); e != 2 || st != 5 {
			t.Fatalf("Ensure %d, State %d: want no Ensure after the record", e, st)
		}
		// A person closes it: the stage fails, no new pull request.
		w.forge.set(func(f *scriptForge) { f.st.Open, f.st.Closed, f.number = false, true, 8 })
		seq := w.seq()
		w.check(key, 0)
		w.wantFlow(key, "prep it=2 step=3 running/")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.stage_finished")
		if r, _ := evs[0].P["report"].(string); !strings.Contains(r, "the pull request was closed without merging") ||
			!strings.Contains(r, "https://forge.invalid/pr/7") {
			t.Fatalf("report %q", r)
		}
		if e, _, _, _ := w.forge.calls(); e != 2 {
			t.Fatalf("Ensure called %d times: a new pull request after a person closed one", e)
		}
		if pr := w.flow(key).PullRequest; pr == nil || pr.Number != 7 {
			t.Fatalf("the flow forgot its pull request: %+v", pr)
		}

		// The next entry of the stage finds it afresh (the forge adopts).
		w.forge.set(func(f *scriptForge) { f.st = openPR })
		w.mustStep(flow.JobEnter, key)
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/approve", nil)
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "ship it=2 step=4 running/checks")
		if pr := w.flow(key).PullRequest; pr != nil {
			t.Fatalf("entering the merge stage again kept %+v", pr)
		}
		w.check(key, 5*time.Second)
		if e, _, _, _ := w.forge.calls(); e != 3 {
			t.Fatalf("Ensure called %d times, want 3", e)
		}
		if pr := w.flow(key).PullRequest; pr == nil || pr.Number != 8 {
			t.Fatalf("recorded %+v, want the pull request the forge gave now", pr)
		}
	})
}

// TestMergeForgeErrors: a forge that rate-limits Ballet snoozes the check
// until it allows calls again (no failed attempt, nothing recorded); one
// that refuses a merge for now is checked again soon, whatever the pace,
// without a second merge before the next state; other errors fail the
// attempt (the job's backoff).
func TestMergeForgeErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		w.patchProject(map[string]any{"merge_policy": map[string]any{"mode": "auto"}})
		yes := true
		ready := openPR
		ready.Mergeable = &yes
		key := w.toShip()
		limited := &forge.RateLimitedError{Until: w.clk.Now().Add(17 * time.Minute)}
		for _, c := range []struct {
			name string
			set  func(f *scriptForge)
		}{
			{"finding the pull request", func(f *scriptForge) { f.ensureErr = fmt.Errorf("list pulls: %w", limited) }},
			{"reading its state", func(f *scriptForge) { f.stateErr = fmt.Errorf("status: %w", limited) }},
			{"merging", func(f *scriptForge) { f.st, f.canMerge, f.mergeErr = ready, true, fmt.Errorf("merge: %w", limited) }},
		} {
			w.forge.set(func(f *scriptForge) { f.zero(); f.st = openPR; c.set(f) })
			seq, before := w.seq(), w.flow(key)
			w.check(key, 17*time.Minute)
			wantTypes(t, w.since(seq))
			if after := w.flow(key); after.Version != before.Version {
				t.Fatalf("%s: rate limited, the flow changed", c.name)
			}
		}

		// Refused for now, an hour in: checked again in 5 s, not 5 min.
		w.clk.Advance(time.Hour)
		for _, refusal := range []error{forge.ErrNotMergeable, forge.ErrOutOfDate} {
			w.forge.set(func(f *scriptForge) {
				f.zero()
				f.st, f.canMerge, f.mergeErr = ready, true, fmt.Errorf("405: %w", refusal)
			})
			w.check(key, 5*time.Second)
			if _, st, m, _ := w.forge.calls(); st != 1 || m != 1 {
				t.Fatalf("%v: %d states, %d merges", refusal, st, m)
			}
		}
		w.wantFlow(key, "ship it=1 step=2 running/checks")
		w.forge.set(func(f *scriptForge) { f.mergeErr = nil })
		w.check(key, 5*time.Minute) // merged now: the long pace again
		// A 5xx on the merge: the attempt fails.
		w.forge.set(func(f *scriptForge) { f.mergeErr = errors.New("500 Internal Server Error") })
		if err := w.step(flow.JobMerge, key); err == nil || job.IsSnooze(err) {
			t.Fatalf("a 500 on merge: %v, want an error", err)
		}
	})
}

// TestCancelClosesThePullRequest: cancelling a ticket whose flow recorded a
// pull request closes it, from a job queued with the stop (a second run
// closes nothing new: the forge's Close of a closed one is nil); pausing
// keeps it open.
func TestCancelClosesThePullRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		w.forge.set(func(f *scriptForge) { f.st = openPR })
		paused := w.toShip()
		w.check(paused, 5*time.Second)
		w.setTicket(paused, "paused")
		w.mustStep(flow.JobStop, paused)
		w.wantFlow(paused, "ship it=1 step=2 stopped/")
		for _, j := range w.pending(nil) {
			if j.Kind == flow.JobClosePR {
				t.Fatalf("a paused ticket's pull request is closed: %v", jobKeys(w.pending(nil)))
			}
		}

		key := w.toShip()
		w.check(key, 5*time.Second)
		w.setTicket(key, "cancelled")
		w.mustStep(flow.JobStop, key)
		f := w.wantFlow(key, "ship it=1 step=2 stopped/")
		if got := jobKeys(w.pending(&f)); len(got) != 2 || !slices.Contains(got, "flow.close_pr flow:"+f.ID+":close_pr") {
			t.Fatalf("jobs after the cancel: %v", got)
		}
		w.mustStep(flow.JobClosePR, key)
		w.replay(flow.JobClosePR, map[string]any{"flow_id": f.ID})
		w.forge.set(func(fg *scriptForge) {
			if len(fg.closes) != 2 || fg.closes[0].Number != 7 || fg.closes[0].Branch != "ballet/"+key {
				t.Fatalf("Close calls %+v", fg.closes)
			}
		})
	})
}

// BenchmarkMergePollADay reports what polling costs a pull request that
// waits a day for a person: the forge calls of its checks (the first one
// Ensure and State, each later one State only: TestMergeFollowsItsPullRequest)
// over the day, in its first hour and in its last hour.
func BenchmarkMergePollADay(b *testing.B) {
	var day, first, last int
	for b.Loop() {
		day, first, last = 0, 0, 0
		calls := 2 // the first check: Ensure, State
		for waited := time.Duration(0); waited < 24*time.Hour; waited += flow.MergePoll(waited) {
			day += calls
			if waited < time.Hour {
				first += calls
			}
			if waited >= 23*time.Hour {
				last += calls
			}
			calls = 1
		}
	}
	b.ReportMetric(float64(day), "calls/day")
	b.ReportMetric(float64(first), "calls/first-hour")
	b.ReportMetric(float64(last), "calls/hour-after-a-day")
}
