package failuretest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/pipeline"
)

// How a ticket ended, as the harness judges it (see verdict).
const (
	endDone      = "done"
	endEscalated = "escalated" // its flow waits for an answer, or failed
	endHeld      = "held"      // ready, not started, behind an escalated (or held) blocker
	endLost      = "lost"      // none of these
)

// verdict is how a ticket ended and why.
type verdict struct {
	it  dbItem
	end string
	// causes and left are the stages of a done ticket that ended off the
	// runner's script: the kills that explain them, and those nothing
	// explains (see offScript).
	causes, left []string
	// why an escalated ticket escalated, or what is left unexplained (see
	// explain).
	why, unexplained string
	// evidence of a lost ticket.
	evidence string
}

// judge decides how every ticket (not an epic) ended: done, escalated,
// held behind an escalated blocker, or lost.
func (s *suite) judge(st *endState) []verdict {
	final := map[string]string{} // item id → endDone / endEscalated
	for _, it := range st.sn.items {
		f, ok := st.latest[it.ID]
		switch {
		case it.Type == "epic" || !ok:
		case f.Status == "done" && it.State == "done":
			final[it.ID] = endDone
		case (f.Status == "waiting" && f.Waiting == "answer" && it.State == "waiting_for_answer") || (f.Status == "failed" && it.State == "paused"):
			final[it.ID] = endEscalated
		}
	}
	var held func(it dbItem, seen map[string]bool) bool
	held = func(it dbItem, seen map[string]bool) bool {
		if seen[it.ID] || it.State != "ready" {
			return false
		}
		seen[it.ID] = true
		if _, started := st.latest[it.ID]; started {
			return false
		}
		for _, id := range st.openBlockers(it) {
			if final[id] == endEscalated || held(st.itemByID[id], seen) {
				return true
			}
		}
		return false
	}
	var out []verdict
	for _, it := range st.sn.items {
		if it.Type == "epic" {
			continue
		}
		v := verdict{it: it}
		f, started := st.latest[it.ID]
		switch {
		case final[it.ID] == endDone:
			v.end = endDone
			v.causes, v.left = s.offScript(it, f, st.byEntity[f.ID], st.runsByStep)
		case final[it.ID] == endEscalated:
			v.end = endEscalated
			v.why, v.unexplained = s.explain(it, f, st.byEntity[f.ID], st.runsByStep)
		case held(it, map[string]bool{}):
			v.end = endHeld
		default:
			v.end = endLost
			ev := ""
			if started {
				ev = st.dump(f.ID)
			}
			var ob []string
			for _, id := range st.openBlockers(it) {
				ob = append(ob, st.keyOf(id)+"="+st.itemByID[id].State)
			}
			v.evidence = fmt.Sprintf("%s: ticket %s, open blockers %v, flow %+v (started %v)%s%s", it.Key, it.State, ob, f, started, ev, st.dump(it.ID))
		}
		out = append(out, v)
	}
	return out
}

// openBlockers lists the ids of an item's blockers (its own and its
// epic's) that are neither done nor cancelled.
func (st *endState) openBlockers(it dbItem) []string {
	var out []string
	for _, id := range st.blockersOf(it) {
		if state := st.itemByID[id].State; state != "done" && state != "cancelled" {
			out = append(out, id)
		}
	}
	return out
}

// ended returns the verdicts that ended so.
func (st *endState) ended(end string) []verdict {
	var out []verdict
	for _, v := range st.verdicts {
		if v.end == end {
			out = append(out, v)
		}
	}
	return out
}

func checkMergedOnce(_ *suite, st *endState, r *report) {
	for _, k := range sortedKeys(st.mg.human) {
		if n := st.mg.human[k]; n > 1 {
			r.dup("branch ballet/%s merged %d times by humans", k, n)
		}
	}
	for _, k := range sortedKeys(st.mg.ballet) {
		if heads := st.mg.ballet[k]; len(heads) > 1 {
			r.dup("branch ballet/%s merged %d times by Ballet (heads %v)", k, len(heads), heads)
		}
		if st.mg.human[k] > 0 {
			r.dup("branch ballet/%s merged by Ballet and by a human", k)
		}
	}
}

func checkAnomalies(s *suite, _ *endState, r *report) {
	for _, a := range s.anomalies {
		r.dup("%s", a)
	}
}

// checkDoneMerged: done means the merge stage saw the branch merged, once:
// an ACME or AGT ticket's by Ballet, at its branch's head, a HUM ticket's
// by a human; a GTA ticket's on Gitea (checkOnGitea), not in the bare
// repository.
func checkDoneMerged(_ *suite, st *endState, r *report) {
	for _, v := range st.ended(endDone) {
		it := v.it
		byBallet, byHuman := st.mg.ballet[it.Key], st.mg.human[it.Key]
		switch projectOf(it.Key) {
		case BalletMerges, Agents:
			if len(byBallet) != 1 || byHuman != 0 || byBallet[0] != st.mg.heads[it.Key] {
				r.bad("%s is done but Ballet merged its branch %d times (heads %v; the branch is at %s) and humans %d times: "+
					"want exactly one merge by Ballet, of the branch's head:%s", it.Key, len(byBallet), byBallet, st.mg.heads[it.Key], byHuman,
					st.dump(st.latest[it.ID].ID))
			}
		case OnGitea:
			if len(byBallet)+byHuman != 0 {
				r.bad("%s is on Gitea, but its branch was merged in the bare repository", it.Key)
			}
		default:
			if byHuman != 1 || len(byBallet) != 0 {
				r.bad("%s is done but its branch was merged %d times by humans and %d times by Ballet (the merge policy is manual: "+
					"the merge stage must see exactly one human merge):%s", it.Key, byHuman, len(byBallet), st.dump(st.latest[it.ID].ID))
			}
		}
	}
}

func checkScriptedEscalation(_ *suite, st *endState, r *report) {
	for _, v := range st.ended(endDone) {
		if projectOf(v.it.Key) != Agents && Escalates(v.it.Number) {
			r.bad("%s is done, but the runner reported its first stage blocked, which must raise a question", v.it.Key)
		}
	}
}

func checkDetours(_ *suite, st *endState, r *report) {
	for _, v := range st.ended(endDone) {
		if len(v.left) > 0 {
			r.bad("UNEXPLAINED DETOUR of %s (done in the end): %s — a stage may end off the script only when a kill cost its run:%s",
				v.it.Key, strings.Join(v.left, "; "), st.dump(st.latest[v.it.ID].ID))
		}
	}
}

func checkEscalations(_ *suite, st *endState, r *report) {
	for _, v := range st.ended(endEscalated) {
		if v.unexplained != "" {
			f := st.latest[v.it.ID]
			r.bad("UNEXPLAINED ESCALATION of %s (flow %s/%s at stage %s): %s — only a scripted escalation or a run that a kill "+
				"cost may escalate a ticket:%s", v.it.Key, f.Status, f.Waiting, f.Stage, v.unexplained, st.dump(f.ID))
		}
	}
}

func checkLost(_ *suite, st *endState, r *report) {
	var lost []string
	for _, v := range st.ended(endLost) {
		lost = append(lost, v.evidence)
	}
	if len(lost) > 0 {
		r.bad("LOST TICKETS (neither done nor escalated nor behind an escalated blocker):\n    %s", strings.Join(lost, "\n    "))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// explain says why an escalated ticket escalated (why), or what is left
// unexplained. A ticket may escalate only when
//
//   - it was scripted to: the runner reported its first agent stage blocked
//     in iteration 1 (Escalates), or
//   - every stage of its flow that ended otherwise than the script says was
//     cost by a kill: its run was in flight at a runner kill (the runner's
//     own log says which), or it failed as silent ("runner silent for …")
//     while Core, the runner or the rqlite leader was down (an outage
//     overlapping the run's silence, from its last heartbeat to its end), or
//   - its flow was flagged because a stage was interrupted more than [runs]
//     max_interruptions times in a row, and a kill explains each of those
//     interruptions (an interruption alone never escalates).
//
// Anything else — a stage that failed for no reason the harness caused, a
// flow flagged stuck, a human stage that was not approved — is unexplained.
func (s *suite) explain(it dbItem, f dbFlow, events []dbEvent, runsByStep map[string]dbRun) (why, unexplained string) {
	var last dbEvent
	for _, e := range events {
		if e.EntityType == entityFlow {
			last = e
		}
	}
	p := last.p()
	if projectOf(it.Key) != Agents && last.Type == evFlowWaiting && p.Waiting == "answer" && p.Outcome == "blocked" &&
		(p.Stage == "implement" || p.Stage == "fix") && p.Iteration == 1 && Escalates(it.Number) {
		return "scripted", ""
	}
	if last.Type == evFlowStuck {
		if j, ok := s.killedJobs[f.ID]; ok && strings.Contains(p.Reason, "lease expired") {
			return fmt.Sprintf("Core killed during each of the last %d claims of %s", j.Expiries, j.Kind), ""
		}
		if strings.Contains(p.Reason, "times in a row") {
			return s.interruptedInARow(it, f, runsByStep)
		}
		return "", "the flow was flagged stuck: " + p.Reason
	}
	causes, left := s.offScript(it, f, events, runsByStep)
	switch {
	case len(left) > 0:
		return "", strings.Join(left, "; ")
	case len(causes) == 0:
		return "", fmt.Sprintf("every stage ended as scripted, yet the flow escalated (%s %s)", last.Type, last.Payload)
	}
	sort.Strings(causes)
	return strings.Join(slices.Compact(causes), "+"), ""
}

// killedEachClaim reports whether dead job j died of claims lost to Core
// kills: its leases ran out job.ExpiryLimit times in a row (its holder
// died each time), and Core went down at least that many times while it
// lived. The orchestrator then rightly gives up (a job that crashes its
// holder every time must not run for ever) and the reconciler flags the
// flow: that is an escalation the kills cost, not a product bug.
func (s *suite) killedEachClaim(j dbJob) bool {
	if j.Status != "dead" || !strings.HasPrefix(j.LastError, "lease expired") || j.FinishedAt == 0 {
		return false
	}
	from, to := time.UnixMilli(j.CreatedAt), time.UnixMilli(j.FinishedAt)
	downs := 0
	for _, o := range s.outages {
		if o.What == "core" && !o.From.Before(from) && !o.From.After(to) {
			downs++
		}
	}
	return j.Expiries > 0 && int64(downs) >= j.Expiries
}

// flowOfJob is the flow a job's payload names ("" for none).
func flowOfJob(j dbJob) string {
	var p struct {
		FlowID string `json:"flow_id"`
	}
	_ = json.Unmarshal([]byte(j.Payload), &p)
	return p.FlowID
}

// offScript looks at every stage of a flow that ended otherwise than the
// script says: causes lists the kills that explain them (see runCause),
// left the ones nothing explains.
func (s *suite) offScript(it dbItem, f dbFlow, events []dbEvent, runsByStep map[string]dbRun) (causes, left []string) {
	for _, e := range events {
		p := e.p()
		switch {
		case e.Type == evFlowStageFinished, e.Type == evFlowFailed, e.Type == evFlowDone:
		case e.Type == evFlowWaiting && p.Waiting == "answer" && p.Outcome != "":
		default:
			continue
		}
		want := scripted(it.Key, it.Number, p.Stage, p.Iteration)
		if projectOf(it.Key) == OnGitea && p.Stage == "integrate" && s.ciFailedIter[it.Key] == p.Iteration {
			want = pipeline.OutcomeFailed // the harness's CI failed the head
		}
		if p.Outcome == want {
			continue
		}
		r, ok := runsByStep[stepOf(f.ID, p.Step)]
		cause := ""
		if ok {
			cause = s.runCause(r, projectOf(it.Key) == Agents)
		}
		what := fmt.Sprintf("stage %s (iteration %d, step %d) ended %s, the script says %s", p.Stage, p.Iteration, p.Step, p.Outcome, want)
		switch {
		case !ok:
			left = append(left, what+" (no run)")
		case cause == "":
			left = append(left, fmt.Sprintf("%s; its run %s is %s (%s) and no kill explains it", what, r.ID, r.Status, r.Error))
		default:
			causes = append(causes, cause)
		}
	}
	return causes, left
}

// scripted is the outcome a stage ends with when nothing interferes: the
// test runner's Outcome for agent stages, done for the human stages (the
// harness approves), for the merge and for every stage of an agent ticket
// (the fake model's scenarios report done; the ask scenario's question
// ends its session without an outcome).
func scripted(key string, number int64, stage string, iteration int) string {
	if projectOf(key) == Agents {
		return "done"
	}
	switch stage {
	case "implement", "review", "verify", "fix", "check":
		return Outcome(number, stage, iteration)
	}
	return "done"
}

// interruptedInARow explains a flow flagged for its interruptions in a
// row: each interrupted run of the flow's current stage and iteration must
// have a kill that explains it (runCause).
func (s *suite) interruptedInARow(it dbItem, f dbFlow, runsByStep map[string]dbRun) (why, unexplained string) {
	var causes, left []string
	for _, r := range runsByStep {
		if r.FlowID != f.ID || r.Status != "interrupted" || r.Stage != f.Stage || r.Iteration != f.Iteration {
			continue
		}
		if c := s.runCause(r, projectOf(it.Key) == Agents); c != "" {
			causes = append(causes, c)
		} else {
			left = append(left, fmt.Sprintf("run %s interrupted (%s: %s) and no kill explains it", r.ID, r.Reason, r.Error))
		}
	}
	switch {
	case len(left) > 0:
		return "", "the flow was flagged for its interruptions: " + strings.Join(left, "; ")
	case len(causes) == 0:
		return "", "the flow was flagged for interruptions, but no run of its stage was interrupted"
	}
	sort.Strings(causes)
	return "interrupted in a row: " + strings.Join(slices.Compact(causes), "+"), ""
}

// runCause says which kill cost a run ("" when none did): it was in flight
// at a runner kill, or it failed as silent while something was down; a run
// of an agent ticket also when the harness killed its agent CLI, or when
// it failed as Core's absence makes a session fail (coreGone) while Core,
// the real runner or the rqlite leader was down.
func (s *suite) runCause(r dbRun, agents bool) string {
	for _, k := range s.runnerKills {
		if slices.Contains(k.Runs, r.ID) {
			return "runner killed mid-run"
		}
	}
	if agents {
		for _, k := range s.agentKills {
			if slices.Contains(k.Runs, r.ID) {
				return "agent runner killed mid-run"
			}
		}
		if s.agents != nil {
			if sessions, _, _, _, _ := s.agents.snapshot(); slices.ContainsFunc(sessions, func(ss agentSession) bool {
				return ss.Run == r.ID && ss.Killed == "agent"
			}) {
				return "agent CLI killed mid-run"
			}
		}
		if r.Status == "failed" && coreGone(r.Error) && r.StartedAt != 0 && r.FinishedAt != 0 {
			for _, o := range s.outages {
				if o.What != "runner" && o.overlaps(time.UnixMilli(r.StartedAt), time.UnixMilli(r.FinishedAt)) { // not the test runner's
					return "in flight while " + o.What + " was down"
				}
			}
		}
	}
	if r.Status == "interrupted" && r.Reason != "runner_lost" && r.StartedAt != 0 && r.FinishedAt != 0 {
		// A restart or a drain of a runner (or Core) the harness caused.
		for _, o := range s.outages {
			if o.overlaps(time.UnixMilli(r.StartedAt), time.UnixMilli(r.FinishedAt)) {
				return "interrupted (" + r.Reason + ") while " + o.What + " was down"
			}
		}
		return ""
	}
	silent := (r.Status == "failed" && strings.HasPrefix(r.Error, "runner silent for")) || (r.Status == "interrupted" && r.Reason == "runner_lost")
	if !silent {
		return ""
	}
	from := r.HeartbeatAt
	if from == 0 {
		from = r.StartedAt
	}
	for _, o := range s.outages {
		if o.overlaps(time.UnixMilli(from), time.UnixMilli(r.FinishedAt)) {
			return "silent while " + o.What + " was down"
		}
	}
	return ""
}

// coreGone reports whether a session's error is one that Core's absence
// causes: the CLI could not reach Core's MCP endpoint at its start, or an
// MCP call failed and the session ended without its report, or Core failed
// the run for a heartbeat it could not take.
func coreGone(err string) bool {
	return strings.Contains(err, "the session ended without submit_report") || strings.Contains(err, "could not connect to Core's MCP endpoint") ||
		strings.HasPrefix(err, "runner silent for")
}
