package flow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
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
			}, "checks failed: ci"},
			{"never pushed", func(f *scriptForge) { f.notPushed = true }, "the branch ballet/%s was never pushed"},
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
