package failuretest

import (
	"fmt"
	"strings"
)

// A check is one invariant the suite guards. A check that fails reports
// its name and, per finding, the evidence (the events, rows or records
// that break it); the summary line counts the checks and names the ones
// that failed.
type check struct {
	name   string // what a failure is reported under
	guards string // what it guards
	run    func(s *suite, st *endState, r *report)
	when   func(s *suite) bool // whether it applies to this run (nil: always)
}

// report collects the findings of one check.
type report struct {
	s        *suite
	findings []string
}

// bad records a finding.
func (r *report) bad(format string, args ...any) {
	r.findings = append(r.findings, fmt.Sprintf(format, args...))
}

// dup records a finding that something happened twice (counted in the
// summary's duplicates).
func (r *report) dup(format string, args ...any) {
	r.s.sum.Duplicates++
	r.bad("DUPLICATE: "+format, args...)
}

// runChecks runs each check of a table over st and returns the findings,
// each as "name: evidence"; the summary counts the checks run and the ones
// that failed.
func (s *suite) runChecks(checks []check, st *endState) []string {
	var problems []string
	for _, c := range checks {
		if c.when != nil && !c.when(s) {
			continue
		}
		r := &report{s: s}
		c.run(s, st, r)
		s.sum.Checks++
		if len(r.findings) > 0 {
			s.sum.Failed = append(s.sum.Failed, c.name)
		}
		for _, f := range r.findings {
			problems = append(problems, c.name+": "+f)
		}
	}
	return problems
}

// endStateChecks are the invariants of the end state: of the event log,
// the flows, runs, items and other rows, the merges in the repository, the
// tickets and the jobs left.
var endStateChecks = []check{
	{name: "event-payloads-match-the-document", run: checkPayloads,
		guards: "every event's payload matches its type's schema in the OpenAPI document Core serves"},
	{name: "seq-has-no-gaps", run: checkSeq,
		guards: "the event log's seq runs from 1 without a gap"},
	{name: "flow-transitions-once", run: checkFlowTransitions,
		guards: "no flow makes a transition twice at one step, nor waits for the same thing twice in a row"},
	{name: "flow-change-has-one-event", run: checkFlowVersions,
		guards: "every change of a flow row (its version) has exactly one flow event"},
	{name: "no-flow-left-running", run: checkFlowsSettled,
		guards: "no flow is still running once everything has settled"},
	{name: "run-created-once", run: checkRunCreated,
		guards: "every run is created once"},
	{name: "run-change-has-one-event", run: checkRunVersions,
		guards: "every change of a run row (its version) has exactly one run event"},
	{name: "run-is-its-stage-run", run: checkRunOfStage,
		guards: "every run is the one its flow's stage start names"},
	{name: "no-run-left-open", run: checkRunsClosed,
		guards: "no run is still queued or running at the end"},
	{name: "one-run-per-step", run: checkRunPerStep,
		guards: "a flow's step has at most one run"},
	{name: "one-run-at-a-time", run: checkRunsInTurn,
		guards: "a flow's runs never overlap: each started after the one before it finished"},
	{name: "item-change-has-one-event", run: checkItemVersions,
		guards: "every change of an item row (its version) has exactly one event"},
	{name: "item-state-is-its-events", run: checkItemStates,
		guards: "an item is in the state its last event says"},
	{name: "row-change-has-one-event", run: checkRowVersions,
		guards: "every change of the other tracked rows (organizations, projects, runners, tokens, questions) has one event"},
	{name: "branch-merged-once", run: checkMergedOnce,
		guards: "a branch is merged at most once, by Ballet or by a human"},
	{name: "no-duplicate-while-driving", run: checkAnomalies,
		guards: "nothing the harness saw while driving happened twice or against the merge policy"},
	{name: "done-ticket-merged", run: checkDoneMerged,
		guards: "a done ticket's branch was merged exactly once, by whom its project's merge policy says, at its head"},
	{name: "scripted-question-asked", run: checkScriptedEscalation,
		guards: "a ticket the runner blocks at its first stage is not done: its question escalates it"},
	{name: "detours-explained", run: checkDetours,
		guards: "a done ticket's stage ended off the runner's script only when a kill cost its run"},
	{name: "escalations-explained", run: checkEscalations,
		guards: "a ticket escalated only as scripted or when a kill cost its run"},
	{name: "no-lost-ticket", run: checkLost,
		guards: "every ticket ended done, escalated, or waits behind an escalated blocker"},
	{name: "blockers-first", run: checkBlockerOrder,
		guards: "a ticket started only after its blockers (and its epic's) were done"},
	{name: "jobs-have-a-reason", run: checkJobs,
		guards: "no job is left pending, running or dead without a reason"},
}

// endState is the end state indexed for the checks, with what the harness
// concludes about each ticket.
type endState struct {
	sn snapshot
	mg merges

	byEntity   map[string][]dbEvent // events by entity id, in seq order
	itemByID   map[string]dbItem
	flowByID   map[string]dbFlow
	latest     map[string]dbFlow   // the newest flow of each item, by item id
	runsByStep map[string]dbRun    // "flow/step" → its (last) run
	blockedBy  map[string][]string // item id → its blockers' ids
	verdicts   []verdict           // of every ticket, in number order

	gitea giteaEnd // what Gitea says (giteaChecks only)
}

func newEndState(s *suite, sn snapshot, mg merges) *endState {
	st := &endState{sn: sn, mg: mg, byEntity: map[string][]dbEvent{}, itemByID: map[string]dbItem{}, flowByID: map[string]dbFlow{},
		latest: map[string]dbFlow{}, runsByStep: map[string]dbRun{}, blockedBy: map[string][]string{}}
	for _, e := range sn.events {
		st.byEntity[e.EntityID] = append(st.byEntity[e.EntityID], e)
	}
	for _, it := range sn.items {
		st.itemByID[it.ID] = it
	}
	for _, f := range sn.flows {
		st.flowByID[f.ID] = f
		if l, ok := st.latest[f.ItemID]; !ok || f.StartedAt >= l.StartedAt {
			st.latest[f.ItemID] = f
		}
	}
	for _, r := range sn.runs {
		st.runsByStep[stepOf(r.FlowID, r.Step)] = r
	}
	for _, b := range sn.blockers {
		st.blockedBy[b[0]] = append(st.blockedBy[b[0]], b[1])
	}
	st.verdicts = s.judge(st)
	return st
}

// stepOf names a flow's step.
func stepOf(flowID string, step int) string { return fmt.Sprintf("%s/%d", flowID, step) }

// dump is an entity's events, as evidence.
func (st *endState) dump(entityID string) string {
	var b strings.Builder
	for _, e := range st.byEntity[entityID] {
		b.WriteString("\n      " + e.String())
	}
	return b.String()
}

// keyOf is the key of an item by its id.
func (st *endState) keyOf(itemID string) string { return st.itemByID[itemID].Key }

// check reads the end state and runs every check that applies to this run
// (those of the agent tickets and of the Gitea tickets only with them);
// the summary's figures come from it too.
func (s *suite) check() []string {
	sn, mg := s.collect()
	problems := s.analyze(sn, mg)
	if s.agents != nil {
		problems = append(problems, s.checkAgents(sn)...)
	}
	if s.gitea != nil {
		problems = append(problems, s.checkOnGitea(sn)...)
	}
	return problems
}

// analyze runs endStateChecks over the end state, mg being what the
// repository says about merges, and fills the summary's figures of it.
func (s *suite) analyze(sn snapshot, mg merges) []string {
	st := newEndState(s, sn, mg)
	s.tally(st)
	return s.runChecks(endStateChecks, st)
}

// tally fills the summary's figures of the end state.
func (s *suite) tally(st *endState) {
	s.sum.Runs, s.sum.Events = len(st.sn.runs), len(st.sn.events)
	for _, n := range st.mg.human {
		s.sum.HumanMerge += n
	}
	for _, heads := range st.mg.ballet {
		s.sum.BalletMerge += len(heads)
	}
	for _, v := range st.verdicts {
		switch v.end {
		case endDone:
			s.sum.Done++
			if s.hit[v.it.Key] {
				s.sum.Resumed++
			}
			if projectOf(v.it.Key) == Agents {
				s.sum.AgentDone++
			}
			s.sum.Detours += len(v.causes) + len(v.left)
			s.sum.UnexplainedDetours += len(v.left)
		case endEscalated:
			s.sum.Escalated++
			if v.unexplained == "" {
				if s.sum.Explained == nil {
					s.sum.Explained = map[string]int{}
				}
				s.sum.Explained[v.why]++
			}
		case endHeld:
			s.sum.Held++
		}
	}
	var evidence string
	s.sum.MaxRunningAtStart, evidence = maxRunningAtStart(st.sn.events, s.o.Limit, func(flowID string) string {
		return projectOf(st.keyOf(st.flowByID[flowID].ItemID))
	})
	if evidence != "" {
		s.logf("concurrency: %s", evidence)
		s.t.Logf("failure suite (%s): concurrency limit %d: %s", s.o.Engine, s.o.Limit, evidence)
	}
}
