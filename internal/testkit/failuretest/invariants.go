package failuretest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/tracker"
)

// The invariants of the event log and of the rows it tells the story of
// (see endStateChecks): each change has its one event, nothing happened
// twice, nothing is left half done.

func checkPayloads(s *suite, st *endState, r *report) {
	if s.doc == nil {
		return
	}
	for _, e := range st.sn.events {
		if err := s.doc.Payload(e.Type, []byte(e.Payload)); err != nil {
			r.bad("EVENT SCHEMA: seq %d: %v", e.Seq, err)
		}
	}
}

func checkSeq(_ *suite, st *endState, r *report) {
	events := st.sn.events
	for i, e := range events {
		if e.Seq != int64(i+1) {
			var around []string
			for j := max(i-3, 0); j < min(i+3, len(events)); j++ {
				around = append(around, events[j].String())
			}
			r.bad("event seq gap: the %d-th event has seq %d:\n      %s", i+1, e.Seq, strings.Join(around, "\n      "))
			return
		}
	}
}

func checkFlowTransitions(_ *suite, st *endState, r *report) {
	for _, f := range st.sn.flows {
		seen := map[string]int64{}
		var lastWait string
		for _, e := range st.byEntity[f.ID] {
			if !flowEvents[e.Type] {
				continue
			}
			p := e.p()
			if onceEach[e.Type] {
				k := fmt.Sprintf("%s@%d", e.Type, p.Step)
				if first, ok := seen[k]; ok {
					r.dup("flow %s of %s: %s twice (seq %d and %d):%s", f.ID, st.keyOf(f.ItemID), k, first, e.Seq, st.dump(f.ID))
				}
				seen[k] = e.Seq
			}
			w := ""
			if e.Type == evFlowWaiting {
				w = fmt.Sprintf("%d/%s", p.Step, p.Waiting)
				if w == lastWait {
					r.dup("flow %s of %s: %s %s twice in a row (seq %d):%s", f.ID, st.keyOf(f.ItemID), evFlowWaiting, w, e.Seq, st.dump(f.ID))
				}
			}
			lastWait = w
		}
	}
}

// checkFlowVersions: the row is inserted at version 1 with flow.started,
// and every update bumps the version with exactly one flow event.
func checkFlowVersions(_ *suite, st *endState, r *report) {
	for _, f := range st.sn.flows {
		n := 0
		for _, e := range st.byEntity[f.ID] {
			if flowEvents[e.Type] {
				n++
			}
		}
		if int64(n) != f.Version {
			r.bad("flow %s of %s: version %d but %d flow.* events (each change must have exactly one):%s", f.ID, st.keyOf(f.ItemID),
				f.Version, n, st.dump(f.ID))
		}
	}
}

func checkFlowsSettled(_ *suite, st *endState, r *report) {
	for _, f := range st.sn.flows {
		if f.Status == "running" {
			r.bad("flow %s of %s still running at the end (stage %s, waiting %q)", f.ID, st.keyOf(f.ItemID), f.Stage, f.Waiting)
		}
	}
}

// runEvents counts a run's own events, and its run.created among them.
func (st *endState) runEvents(runID string) (all, created int) {
	for _, e := range st.byEntity[runID] {
		if e.EntityType != entityRun {
			continue
		}
		all++
		if e.Type == evRunCreated {
			created++
		}
	}
	return all, created
}

func checkRunCreated(_ *suite, st *endState, r *report) {
	for _, x := range st.sn.runs {
		if _, created := st.runEvents(x.ID); created != 1 {
			r.dup("run %s of %s (%s step %d): %d %s events:%s", x.ID, st.keyOf(x.ItemID), x.Stage, x.Step, created, evRunCreated, st.dump(x.ID))
		}
	}
}

func checkRunVersions(_ *suite, st *endState, r *report) {
	for _, x := range st.sn.runs {
		if all, _ := st.runEvents(x.ID); int64(all) != x.Version {
			r.bad("run %s of %s: version %d but %d run.* events:%s", x.ID, st.keyOf(x.ItemID), x.Version, all, st.dump(x.ID))
		}
	}
}

func checkRunOfStage(_ *suite, st *endState, r *report) {
	startedRun := map[string]string{} // "flow/step" → run id of flow.stage_started
	for _, e := range st.sn.events {
		if e.Type == evFlowStageStarted {
			if p := e.p(); p.Run != "" {
				startedRun[stepOf(e.EntityID, p.Step)] = p.Run
			}
		}
	}
	for _, x := range st.sn.runs {
		if k := stepOf(x.FlowID, x.Step); startedRun[k] != x.ID {
			r.bad("run %s of %s (%s step %d) is not the run of its %s (%q)", x.ID, st.keyOf(x.ItemID), x.Stage, x.Step, evFlowStageStarted, startedRun[k])
		}
	}
}

func checkRunsClosed(_ *suite, st *endState, r *report) {
	for _, x := range st.sn.runs {
		if x.Status == "queued" || x.Status == "running" {
			r.bad("run %s of %s (%s step %d) is still %s at the end", x.ID, st.keyOf(x.ItemID), x.Stage, x.Step, x.Status)
		}
	}
}

func checkRunPerStep(_ *suite, st *endState, r *report) {
	perStep := map[string][]dbRun{}
	for _, x := range st.sn.runs {
		k := stepOf(x.FlowID, x.Step)
		perStep[k] = append(perStep[k], x)
	}
	for k, rs := range perStep {
		if len(rs) > 1 {
			r.dup("%d runs for flow step %s: %+v", len(rs), k, rs)
		}
	}
}

func checkRunsInTurn(_ *suite, st *endState, r *report) {
	last := map[string]dbRun{} // by flow, in creation order
	for _, x := range st.sn.runs {
		if p, ok := last[x.FlowID]; ok && x.StartedAt != 0 && (p.FinishedAt == 0 || x.StartedAt < p.FinishedAt) {
			r.dup("runs %s (%s step %d) and %s (%s step %d) of %s ran at once", p.ID, p.Stage, p.Step, x.ID, x.Stage, x.Step, st.keyOf(x.ItemID))
		}
		last[x.FlowID] = x
	}
}

// itemEvents counts an item's own events that bump its version (blocker
// changes do not) and returns the state the last of them says.
func (st *endState) itemEvents(it dbItem) (n int, state string) {
	for _, e := range st.byEntity[it.ID] {
		if e.EntityID != it.ID || itemBlocker[e.Type] {
			continue
		}
		n++
		switch {
		case itemCreated[e.Type]:
			state = e.item().State
		case itemStateChanged[e.Type]:
			state = e.stateChange().To
		}
	}
	return n, state
}

func checkItemVersions(_ *suite, st *endState, r *report) {
	for _, it := range st.sn.items {
		if n, _ := st.itemEvents(it); int64(n) != it.Version {
			r.bad("item %s: version %d but %d events:%s", it.Key, it.Version, n, st.dump(it.ID))
		}
	}
}

func checkItemStates(_ *suite, st *endState, r *report) {
	for _, it := range st.sn.items {
		if _, state := st.itemEvents(it); state != it.State {
			r.bad("item %s is %s but its events say %s:%s", it.Key, it.State, state, st.dump(it.ID))
		}
	}
}

func checkRowVersions(_ *suite, st *endState, r *report) {
	for _, v := range st.sn.versions {
		if n := len(st.byEntity[v.ID]); int64(n) != v.Version {
			r.bad("%s row %s: version %d but %d events:%s", v.Table, v.ID, v.Version, n, st.dump(v.ID))
		}
	}
}

// checkBlockerOrder: a ticket started only after all its blockers (and
// its epic's) were done.
func checkBlockerOrder(_ *suite, st *endState, r *report) {
	doneAt := map[string]int64{}
	startedAt := map[string]int64{}
	for _, e := range st.sn.events {
		switch e.Type {
		case evTicketStateChanged:
			if p, _ := decode[tracker.TicketStateChanged](e); p.To == tracker.StateDone {
				doneAt[e.EntityID] = e.Seq
			}
		case evFlowStarted:
			if f, ok := st.flowByID[e.EntityID]; ok {
				if _, seen := startedAt[f.ItemID]; !seen {
					startedAt[f.ItemID] = e.Seq
				}
			}
		}
	}
	for _, it := range st.sn.items {
		at, ok := startedAt[it.ID]
		if !ok {
			continue
		}
		for _, id := range st.blockersOf(it) {
			if d, ok := doneAt[id]; !ok || d > at {
				r.bad("%s started (seq %d) before its blocker %s was done (seq %d, 0 = never)", it.Key, at, st.keyOf(id), d)
			}
		}
	}
}

// blockersOf lists the ids of an item's blockers and its epic's.
func (st *endState) blockersOf(it dbItem) []string {
	ids := append([]string(nil), st.blockedBy[it.ID]...)
	if it.EpicID != "" {
		ids = append(ids, st.blockedBy[it.EpicID]...)
	}
	return ids
}

// checkJobs: nothing pending or running without a reason, nothing dead
// but a job whose claims, too many in a row, were each lost to a Core kill.
func checkJobs(s *suite, st *endState, r *report) {
	for _, j := range st.sn.jobs {
		var p struct {
			FlowID string `json:"flow_id"`
		}
		_ = json.Unmarshal([]byte(j.Payload), &p)
		f := st.flowByID[p.FlowID]
		switch {
		case j.Status == "dead" && s.killedEachClaim(j):
			// Core was killed during each of its last claims: the
			// orchestrator gave up, and the reconciler flagged the flow (see
			// explain).
			s.logf("job %s %s is dead: Core was killed during each of its last %d claims (%s)", j.ID, j.Kind, j.Expiries, j.LastError)
		case j.Status == "dead":
			r.bad("job %s %s is dead after %d attempts: %s (payload %s, flow status %s/%s)", j.ID, j.Kind, j.Attempt, j.LastError, j.Payload,
				f.Status, f.Waiting)
		case j.Kind == jobFlowTimeout && j.Status == "pending":
			// the stage timeout's timer: a no-op when it fires after the stage
		case j.Kind == jobEscalate && j.Status == "pending":
			// the escalation's timer of a question or an approval: a no-op
			// when it fires after the wait ended
		case j.Kind == jobFlowMerge && j.Status == "pending" && (f.Waiting == "merge" || f.Waiting == "checks" || f.Waiting == "review"):
			// a snoozed merge check of a flow still waiting for the merge
		default:
			r.bad("job %s %s is %s without a reason (run_at %s, payload %s, flow status %s/%s, last error %q)", j.ID, j.Kind, j.Status,
				time.UnixMilli(j.RunAt).UTC().Format(time.RFC3339), j.Payload, f.Status, f.Waiting, j.LastError)
		}
	}
}

// maxRunningAtStart replays the flow events and returns the most flows of
// one project (projectOf a flow id) that were running (occupying a slot)
// when another flow of that project started, with evidence for every start
// at or above limit: the running flows and the event that made each run.
// It is reported, not asserted: the scheduler reads the limits without
// locking them, and a human's approval makes a waiting flow run again
// whatever the limit.
func maxRunningAtStart(events []dbEvent, limit int, projectOf func(flowID string) string) (int, string) {
	running := map[string]map[string]dbEvent{} // project → flow → the event that made it run
	most := 0
	var b strings.Builder
	for _, e := range events {
		if e.EntityType != entityFlow {
			continue
		}
		p := projectOf(e.EntityID)
		if running[p] == nil {
			running[p] = map[string]dbEvent{}
		}
		run := running[p]
		switch e.Type {
		case evFlowStarted:
			most = max(most, len(run))
			if limit > 0 && len(run) >= limit {
				fmt.Fprintf(&b, "\n  %d flows of %s running at %s:", len(run), p, e)
				var ids []string
				for id := range run {
					ids = append(ids, id)
				}
				sort.Slice(ids, func(i, j int) bool { return run[ids[i]].Seq < run[ids[j]].Seq })
				for _, id := range ids {
					fmt.Fprintf(&b, "\n      since %s", run[id])
				}
			}
			run[e.EntityID] = e
		case evFlowStageStarted, evFlowWaiting:
			if w := e.p().Waiting; w == "run" || w == "checks" || w == "" {
				if _, ok := run[e.EntityID]; !ok {
					run[e.EntityID] = e
				}
			} else {
				delete(run, e.EntityID)
			}
		case evFlowStageFinished, evFlowResumed:
			if _, ok := run[e.EntityID]; !ok {
				run[e.EntityID] = e
			}
		default: // done, failed, stopped, stuck
			delete(run, e.EntityID)
		}
	}
	return most, b.String()
}
