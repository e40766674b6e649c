package failuretest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/testkit/openapitest"
)

// world builds a small end state for the checks' own test: ticket ACME-1
// done through one agent stage and a merge by Ballet, ticket ACME-2
// (blocked by ACME-1) done after it.
type world struct {
	sn  snapshot
	seq int64
}

func (w *world) ev(entityType, entityID, typ string, payload map[string]any) {
	w.seq++
	b, _ := json.Marshal(payload)
	w.sn.events = append(w.sn.events, dbEvent{Seq: w.seq, EntityType: entityType, EntityID: entityID, Type: typ, Payload: string(b)})
}

func (w *world) ticket(id, key string, number int64) {
	w.ev(entityTicket, id, evTicketCreated, map[string]any{"state": "backlog"})
	w.ev(entityTicket, id, evTicketStateChanged, map[string]any{"to": "ready"})
	w.sn.items = append(w.sn.items, dbItem{ID: id, Key: key, Type: "task", State: "done", Version: 4, Number: number})
}

func (w *world) run(item, flow, run string) {
	w.ev(entityFlow, flow, evFlowStarted, map[string]any{"step": 1})
	w.ev(entityTicket, item, evTicketStateChanged, map[string]any{"to": "in_progress"})
	w.ev(entityFlow, flow, evFlowStageStarted, map[string]any{"step": 1, "stage": "implement", "iteration": 1, "run": run})
	w.ev(entityRun, run, evRunCreated, nil)
	w.ev(entityRun, run, evRunStarted, nil)
	w.ev(entityRun, run, evRunReported, nil)
	w.ev(entityRun, run, evRunFinished, nil)
	w.ev(entityFlow, flow, evFlowStageFinished, map[string]any{"step": 1, "stage": "implement", "iteration": 1, "outcome": "done"})
	w.ev(entityFlow, flow, evFlowStageStarted, map[string]any{"step": 2, "stage": "integrate", "iteration": 1})
	w.ev(entityFlow, flow, evFlowWaiting, map[string]any{"step": 2, "stage": "integrate", "iteration": 1, "waiting": "checks"})
	w.ev(entityFlow, flow, evFlowDone, map[string]any{"step": 2, "stage": "integrate", "iteration": 1, "outcome": "done"})
	w.ev(entityTicket, item, evTicketStateChanged, map[string]any{"to": "done"})
	w.sn.flows = append(w.sn.flows, dbFlow{ID: flow, ItemID: item, Status: "done", Stage: "integrate", Step: 2, Iteration: 1, Version: 6, StartedAt: w.seq})
	w.sn.runs = append(w.sn.runs, dbRun{ID: run, FlowID: flow, ItemID: item, Stage: "implement", Status: "succeeded", Iteration: 1, Step: 1, Version: 4})
	w.sn.jobs = append(w.sn.jobs, dbJob{ID: "t-" + run, Kind: jobFlowTimeout, Status: "pending", Payload: `{"flow_id":"` + flow + `","step":1}`})
}

func newWorld() *world {
	w := &world{}
	w.ticket("i1", "ACME-1", 1)
	w.ticket("i2", "ACME-2", 2)
	w.sn.blockers = [][2]string{{"i2", "i1"}}
	w.run("i1", "f1", "r1")
	w.run("i2", "f2", "r2")
	return w
}

// mergedByBallet is the repository of the world: Ballet merged both
// tickets' branches at their heads.
func mergedByBallet() merges {
	return merges{human: map[string]int{}, ballet: map[string][]string{"ACME-1": {"h1"}, "ACME-2": {"h2"}},
		heads: map[string]string{"ACME-1": "h1", "ACME-2": "h2"}}
}

// TestChecksCatchBrokenEndStates makes sure the suite's assertions bite:
// a consistent end state passes, and each kind of breakage is reported.
func TestChecksCatchBrokenEndStates(t *testing.T) {
	s := &suite{t: t, hit: map[string]bool{}}
	if p := s.analyze(newWorld().sn, mergedByBallet()); len(p) != 0 {
		t.Fatalf("a consistent end state has problems:\n%s", strings.Join(p, "\n"))
	}
	if line := s.sum.Line(); s.sum.Checks != len(endStateChecks) || !strings.HasSuffix(line, fmt.Sprintf(" checks=%d failed=none", len(endStateChecks))) {
		t.Errorf("%d checks, summary line %q", s.sum.Checks, line)
	}
	// A scripted escalation (ACME-17's first stage blocked) holds the
	// ticket it blocks: not lost.
	w := escalatedWorld(`{"step":1,"stage":"implement","iteration":1,"waiting":"answer","outcome":"blocked"}`)
	s = &suite{t: t, hit: map[string]bool{}}
	if p := s.analyze(w.sn, merges{}); len(p) != 0 || s.sum.Escalated != 1 || s.sum.Held != 1 || s.sum.Explained["scripted"] != 1 {
		t.Fatalf("escalated %d (%v), held %d, problems:\n%s", s.sum.Escalated, s.sum.Explained, s.sum.Held, strings.Join(p, "\n"))
	}
	cases := []struct {
		name   string
		break_ func(w *world) *merges
		want   []string
	}{
		{"seq gap", func(w *world) *merges {
			for i := 5; i < len(w.sn.events); i++ {
				w.sn.events[i].Seq++
			}
			return nil
		}, []string{"seq-has-no-gaps: event seq gap: the 6-th event has seq 7"}},
		{"duplicate stage finish", func(w *world) *merges {
			w.ev(entityFlow, "f1", evFlowStageFinished, map[string]any{"step": 1})
			return nil
		}, []string{"flow-transitions-once: DUPLICATE: flow f1 of ACME-1: flow.stage_finished@1 twice", "flow-change-has-one-event: flow f1 of ACME-1: version 6 but 7 flow.* events",
			"detours-explained: UNEXPLAINED DETOUR of ACME-1 (done in the end): stage  (iteration 0, step 1) ended , the script says done"}},
		{"repeated wait", func(w *world) *merges {
			w.sn.events = append(w.sn.events[:14], append([]dbEvent{w.sn.events[13]}, w.sn.events[14:]...)...)
			for i := range w.sn.events {
				w.sn.events[i].Seq = int64(i + 1)
			}
			return nil
		}, []string{"flow-transitions-once: DUPLICATE: flow f1 of ACME-1: flow.waiting 2/checks twice in a row", "flow-change-has-one-event: flow f1 of ACME-1: version 6 but 7"}},
		{"state change without event", func(w *world) *merges {
			w.sn.items[0].Version = 5
			return nil
		}, []string{"item-change-has-one-event: item ACME-1: version 5 but 4 events"}},
		{"two runs created", func(w *world) *merges {
			w.ev(entityRun, "r1", evRunCreated, nil)
			return nil
		}, []string{"run-created-once: DUPLICATE: run r1 of ACME-1 (implement step 1): 2 run.created events", "run-change-has-one-event: run r1 of ACME-1: version 4 but 5 run.* events"}},
		{"merged twice by Ballet", func(*world) *merges {
			m := mergedByBallet()
			m.ballet["ACME-1"] = []string{"h1", "h1"}
			return &m
		}, []string{"branch-merged-once: DUPLICATE: branch ballet/ACME-1 merged 2 times by Ballet", "done-ticket-merged: ACME-1 is done but Ballet merged its branch 2 times"}},
		{"two runs of a flow at once", func(w *world) *merges {
			w.sn.runs[0].StartedAt, w.sn.runs[0].FinishedAt = 1000, 5000
			w.sn.runs = append(w.sn.runs, dbRun{ID: "r3", FlowID: "f1", ItemID: "i1", Stage: "implement", Status: "succeeded", Step: 3,
				StartedAt: 4000, FinishedAt: 6000})
			return nil
		}, []string{"one-run-at-a-time: DUPLICATE: runs r1 (implement step 1) and r3 (implement step 3) of ACME-1 ran at once", "run-is-its-stage-run: run r3 of ACME-1 (implement step 3) is not the run of its flow.stage_started",
			"run-created-once: DUPLICATE: run r3 of ACME-1 (implement step 3): 0 run.created events"}},
		{"done without merge", func(*world) *merges {
			m := mergedByBallet()
			delete(m.ballet, "ACME-2")
			return &m
		}, []string{"done-ticket-merged: ACME-2 is done but Ballet merged its branch 0 times"}},
		{"merged an old head", func(*world) *merges {
			m := mergedByBallet()
			m.heads["ACME-2"] = "h3"
			return &m
		}, []string{"done-ticket-merged: ACME-2 is done but Ballet merged its branch 1 times (heads [h2]; the branch is at h3)"}},
		{"merged by a human under the auto policy", func(*world) *merges {
			m := mergedByBallet()
			m.human["ACME-1"] = 1
			return &m
		}, []string{"branch-merged-once: DUPLICATE: branch ballet/ACME-1 merged by Ballet and by a human", "done-ticket-merged: ACME-1 is done but Ballet merged its branch 1 times (heads [h1]; the branch is at h1) and humans 1 times"}},
		{"a manual project merged by Ballet", func(w *world) *merges {
			w.sn.items[1].Key = "HUM-2"
			m := mergedByBallet()
			m.ballet["HUM-2"] = m.ballet["ACME-2"]
			return &m
		}, []string{"done-ticket-merged: HUM-2 is done but its branch was merged 0 times by humans and 1 times by Ballet"}},
		{"a manual project merged twice by humans", func(w *world) *merges {
			w.sn.items[1].Key = "HUM-2"
			m := mergedByBallet()
			m.human["HUM-2"] = 2
			return &m
		}, []string{"branch-merged-once: DUPLICATE: branch ballet/HUM-2 merged 2 times by humans", "done-ticket-merged: HUM-2 is done but its branch was merged 2 times by humans"}},
		{"lost ticket", func(w *world) *merges {
			w.sn.flows[1].Status, w.sn.flows[1].Waiting = "running", "run"
			w.sn.items[1].State = "in_progress"
			return nil
		}, []string{"no-lost-ticket: LOST TICKETS", "ACME-2: ticket in_progress", "no-flow-left-running: flow f2 of ACME-2 still running",
			"item-state-is-its-events: item ACME-2 is in_progress but its events say done"}},
		{"blocker order", func(w *world) *merges {
			w.sn.blockers = [][2]string{{"i1", "i2"}}
			return nil
		}, []string{"blockers-first: ACME-1 started (seq 5) before its blocker ACME-2 was done (seq 28"}},
		{"job without reason", func(w *world) *merges {
			w.sn.jobs = append(w.sn.jobs, dbJob{ID: "j", Kind: flow.JobEnter, Status: "pending", Payload: `{"flow_id":"f1","step":3}`},
				dbJob{ID: "d", Kind: flow.JobRunFinished, Status: "dead", Payload: `{"flow_id":"f2"}`, LastError: "boom"})
			return nil
		}, []string{"jobs-have-a-reason: job j flow.enter is pending without a reason", "jobs-have-a-reason: job d flow.run_finished is dead after 0 attempts: boom"}},
		{"a detour no kill explains", func(w *world) *merges {
			// ACME-2's implement ended failed and the flow went on (as if
			// the pipeline sent it back): its run just failed.
			if e := w.sn.events[23]; e.EntityID != "f2" || e.Type != evFlowStageFinished {
				t.Fatalf("event 23 is %s", e)
			}
			w.sn.events[23].Payload = `{"step":1,"stage":"implement","iteration":1,"outcome":"failed"}`
			w.sn.runs[1].Status, w.sn.runs[1].Error = "failed", "the session exited with status 1"
			return nil
		}, []string{"detours-explained: UNEXPLAINED DETOUR of ACME-2 (done in the end): stage implement (iteration 1, step 1) ended failed, the script says done; " +
			"its run r2 is failed (the session exited with status 1) and no kill explains it"}},
		{"run left open", func(w *world) *merges {
			w.sn.runs[0].Status = "running"
			return nil
		}, []string{"no-run-left-open: run r1 of ACME-1 (implement step 1) is still running at the end"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			mg := c.break_(w)
			s := &suite{t: t, hit: map[string]bool{}}
			if mg == nil {
				m := mergedByBallet()
				mg = &m
			}
			p := strings.Join(s.analyze(w.sn, *mg), "\n")
			// Each failing check reports its name with each finding, and
			// the summary names it: those of the findings wanted, and no
			// other.
			var names []string
			for _, want := range c.want {
				if name, _, _ := strings.Cut(want, ": "); slices.ContainsFunc(endStateChecks, func(c check) bool { return c.name == name }) && !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			if got, want := slices.Sorted(slices.Values(s.sum.Failed)), slices.Sorted(slices.Values(names)); !slices.Equal(got, want) {
				t.Errorf("failed checks %v, want %v; problems:\n%s", got, want, p)
			}
			if line := s.sum.Line(); !strings.HasSuffix(line, fmt.Sprintf(" checks=%d failed=%s", len(endStateChecks), strings.Join(s.sum.Failed, ","))) {
				t.Errorf("summary line %q", line)
			}
			for _, want := range c.want {
				if !strings.Contains(p, want) {
					t.Errorf("%q not reported; problems:\n%s", want, p)
				}
			}
		})
	}
}

// TestChecksHoldPayloadsToTheDocument: every payload in the log must match
// its type's schema in the OpenAPI document Core serves.
func TestChecksHoldPayloadsToTheDocument(t *testing.T) {
	api := server.NewAPI(slog.New(slog.DiscardHandler), nil, nil, server.Finders{}, 1<<20, 0)
	b, err := json.Marshal(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapitest.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{}
	w.ev(entityRun, "r1", evRunReported, map[string]any{"outcome": "done", "summary": "ok"})
	w.ev(entityRun, "r1", evRunReported, map[string]any{"Outcome": "done", "Summary": "ok"})
	w.ev(entityRun, "r1", "run.napped", map[string]any{})
	s := &suite{t: t, hit: map[string]bool{}, doc: doc}
	var got []string
	for _, p := range s.analyze(w.sn, merges{}) {
		if strings.HasPrefix(p, "event-payloads-match-the-document: EVENT SCHEMA") {
			got = append(got, p)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], "seq 2") || !strings.Contains(got[1], "not in the catalogue") {
		t.Fatalf("problems:\n%s", strings.Join(got, "\n"))
	}
}

// escalatedWorld is the world with ACME-17 (formerly ACME-1) escalated:
// its flow waits for an answer after the flow.waiting event given, at its
// first stage, and ACME-2 is held behind it.
func escalatedWorld(waiting string) *world {
	w := newWorld()
	w.sn.items[0].Key, w.sn.items[0].Number = "ACME-17", 17
	w.sn.flows[0].Status, w.sn.flows[0].Waiting, w.sn.items[0].State = "waiting", "answer", "waiting_for_answer"
	w.sn.flows[0].Stage, w.sn.flows[0].Version = "implement", 3
	w.sn.flows, w.sn.runs, w.sn.items[1].State = w.sn.flows[:1], w.sn.runs[:1], "ready"
	w.sn.events = append(w.sn.events[:11], // through run.finished
		dbEvent{Seq: 12, EntityType: entityFlow, EntityID: "f1", Type: evFlowWaiting, Payload: waiting},
		dbEvent{Seq: 13, EntityType: entityTicket, EntityID: "i1", Type: evTicketStateChanged, Payload: `{"to":"waiting_for_answer"}`})
	w.sn.items[1].Version = 2
	w.sn.runs[0].Status, w.sn.runs[0].Error = "failed", "runner silent for 3s (no heartbeat since …)"
	w.sn.runs[0].StartedAt, w.sn.runs[0].HeartbeatAt, w.sn.runs[0].FinishedAt = 1000, 2000, 6000
	return w
}

// agentTicket, as a case's number, makes the escalated ticket AGT-17: an
// agent ticket (its every stage is scripted done).
const agentTicket = -1

// TestEveryEscalationIsExplained: an escalation passes only when it was
// scripted or a kill cost the run whose stage ended off-script.
func TestEveryEscalationIsExplained(t *testing.T) {
	failed := `{"step":1,"stage":"implement","iteration":1,"waiting":"answer","outcome":"failed"}`
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	for _, c := range []struct {
		name    string
		waiting string
		number  int64
		setup   func(s *suite, w *world)
		why     string // "" when unexplained
		problem string
	}{
		{"scripted", `{"step":1,"stage":"implement","iteration":1,"waiting":"answer","outcome":"blocked"}`, 17, nil, "scripted", ""},
		{"blocked, but not scripted", `{"step":1,"stage":"implement","iteration":1,"waiting":"answer","outcome":"blocked"}`, 16, nil, "",
			"stage implement (iteration 1, step 1) ended blocked, the script says done; its run r1 is failed"},
		{"a failure no kill explains", failed, 17, nil, "", "stage implement (iteration 1, step 1) ended failed, the script says blocked; " +
			"its run r1 is failed (runner silent for 3s (no heartbeat since …)) and no kill explains it"},
		{"in flight at a runner kill", failed, 17, func(s *suite, _ *world) {
			s.runnerKills = []runnerKill{{At: at(1500), Runs: []string{"r0", "r1"}}}
		}, "runner killed mid-run", ""},
		{"another run in flight at a runner kill", failed, 17, func(s *suite, _ *world) {
			s.runnerKills = []runnerKill{{At: at(1500), Runs: []string{"r0"}}}
		}, "", "no kill explains it"},
		{"silent while Core was down", failed, 17, func(s *suite, _ *world) {
			s.outages = []outage{{What: "core", From: at(5000), To: at(9000)}}
		}, "silent while core was down", ""},
		{"silent while the runner was down, still", failed, 17, func(s *suite, _ *world) {
			s.outages = []outage{{What: "runner", From: at(1000)}}
		}, "silent while runner was down", ""},
		{"an outage before the run", failed, 17, func(s *suite, _ *world) {
			s.outages = []outage{{What: "core", From: at(100), To: at(1999)}}
		}, "", "no kill explains it"},
		{"an outage after the run", failed, 17, func(s *suite, _ *world) {
			s.outages = []outage{{What: "rqlite leader", From: at(6001), To: at(7000)}}
		}, "", "no kill explains it"},
		{"silent is the only failure an outage explains", failed, 17, func(s *suite, w *world) {
			w.sn.runs[0].Error = "the session exited with status 1"
			s.outages = []outage{{What: "core", From: at(5000), To: at(9000)}}
		}, "", "its run r1 is failed (the session exited with status 1) and no kill explains it"},
		{"agent ticket: its agent CLI killed", failed, agentTicket, func(s *suite, w *world) {
			w.sn.runs[0].Error = "the agent CLI exited with status 137"
			s.agents = &agentRunner{order: []*agentSession{{Run: "r1", Killed: "agent"}}}
		}, "agent CLI killed mid-run", ""},
		{"agent ticket: in flight at a kill of the real runner", failed, agentTicket, func(s *suite, _ *world) {
			s.agentKills = []runnerKill{{At: at(1500), Runs: []string{"r1"}}}
		}, "agent runner killed mid-run", ""},
		{"agent ticket: no report while Core was down", failed, agentTicket, func(s *suite, w *world) {
			w.sn.runs[0].Error = "the session ended without submit_report"
			s.outages = []outage{{What: "core", From: at(3000), To: at(4000)}}
		}, "in flight while core was down", ""},
		{"agent ticket: no report, Core up", failed, agentTicket, func(s *suite, w *world) {
			w.sn.runs[0].Error = "the session ended without submit_report"
			s.outages = []outage{{What: "core", From: at(7000), To: at(8000)}}
		}, "", "ended failed, the script says done; its run r1 is failed (the session ended without submit_report) and no kill explains it"},
		{"agent ticket: the test runner's outage explains nothing", failed, agentTicket, func(s *suite, w *world) {
			w.sn.runs[0].Error = "the session ended without submit_report"
			s.outages = []outage{{What: "runner", From: at(3000), To: at(4000)}}
		}, "", "no kill explains it"},
		{"agent ticket: a failure Core's absence does not cause", failed, agentTicket, func(s *suite, w *world) {
			w.sn.runs[0].Error = "the agent CLI exited with status 1"
			s.outages = []outage{{What: "core", From: at(3000), To: at(4000)}}
		}, "", "no kill explains it"},
		{"agent ticket: blocked is never scripted", `{"step":1,"stage":"implement","iteration":1,"waiting":"answer","outcome":"blocked"}`,
			agentTicket, nil, "", "ended blocked, the script says done"},
		{"stuck", `{"step":1,"stage":"implement","iteration":1,"waiting":"answer","reason":"the job died"}`, 17, func(_ *suite, w *world) {
			w.sn.events[11].Type = evFlowStuck
		}, "", "the flow was flagged stuck: the job died"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := escalatedWorld(c.waiting)
			w.sn.items[0].Number = c.number
			key := "ACME-17"
			if c.number == agentTicket {
				key, w.sn.items[0].Number = Agents+"-17", 17
				w.sn.items[0].Key = key
			}
			s := &suite{t: t, hit: map[string]bool{}}
			if c.setup != nil {
				c.setup(s, w)
			}
			p := strings.Join(s.analyze(w.sn, merges{}), "\n")
			switch {
			case c.why != "" && (p != "" || s.sum.Explained[c.why] != 1):
				t.Fatalf("explained %v, want %q; problems:\n%s", s.sum.Explained, c.why, p)
			case c.why == "" && (!strings.Contains(p, "UNEXPLAINED ESCALATION of "+key) || !strings.Contains(p, c.problem)):
				t.Fatalf("problems do not say %q:\n%s", c.problem, p)
			}
		})
	}
}

// TestAgentChecks makes sure the checks of the agent tickets bite: a run
// leased twice, two sessions of a ticket at once, a killed session's
// checkpoint not restored by the stage's next session, what a sweep found
// and an agent process alive at the end are each reported.
func TestAgentChecks(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	good := func() []*agentSession {
		return []*agentSession{
			{Run: "a1", Ticket: "AGT-1", Stage: "implement", Start: 1, Started: at(0), Checkpoints: 2, Killed: "runner"},
			{Run: "a2", Ticket: "AGT-1", Stage: "implement", Start: 2, Started: at(10), Ended: at(15), Restored: true, Finished: true},
			{Run: "a3", Ticket: "AGT-1", Stage: "review", Start: 2, Started: at(16), Ended: at(20), Finished: true},
			{Run: "a4", Ticket: "AGT-2", Stage: "implement", Start: 2, Started: at(12), Ended: at(14), Finished: true},
		}
	}
	check := func(t *testing.T, sessions []*agentSession, edit func(a *agentRunner, sn *snapshot)) []string {
		a := &agentRunner{order: sessions, kills: []runnerKill{{At: at(5), Runs: []string{"a1"}}}}
		sn := snapshot{items: []dbItem{{ID: "i1", Key: "AGT-1"}, {ID: "i2", Key: "AGT-2"}},
			runs: []dbRun{{ID: "a1", ItemID: "i1", Status: "failed"}, {ID: "a2", ItemID: "i1", Status: "succeeded"}}}
		if edit != nil {
			edit(a, &sn)
		}
		s := &suite{t: t, agents: a}
		p := s.checkAgents(sn)
		if s.sum.AgentSessions != len(sessions) || s.sum.CheckpointsRestored != 1 {
			t.Errorf("%d sessions, %d restored; want %d and 1", s.sum.AgentSessions, s.sum.CheckpointsRestored, len(sessions))
		}
		return p
	}
	if p := check(t, good(), nil); len(p) != 0 {
		t.Fatalf("consistent sessions have problems:\n%s", strings.Join(p, "\n"))
	}
	// A process that carries the marker of run a2, as a session's would.
	orphan := exec.Command("sleep", "60")
	orphan.Env = append(os.Environ(), proc.Marker("a2"))
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orphan.Process.Kill(); _ = orphan.Wait() })
	for _, c := range []struct {
		name string
		edit func(ss []*agentSession, a *agentRunner, sn *snapshot)
		want string
	}{
		{"leased twice", func(_ []*agentSession, a *agentRunner, _ *snapshot) { a.twice = []string{"a3"} },
			"agent-run-leased-once: DUPLICATE: run a3 was leased twice"},
		{"two sessions at once", func(ss []*agentSession, _ *agentRunner, _ *snapshot) { ss[2].Started = at(14) },
			"agent-sessions-in-turn: DUPLICATE: AGT-1: the session of run a3 started while that of run a2 still ran"},
		{"a session started before its killed runner died", func(ss []*agentSession, _ *agentRunner, _ *snapshot) { ss[1].Started = at(4) },
			"agent-sessions-in-turn: DUPLICATE: AGT-1: the session of run a2 started while that of run a1 still ran"},
		{"checkpoint not restored", func(ss []*agentSession, _ *agentRunner, _ *snapshot) { ss[1].Restored, ss[3].Restored = false, true },
			"checkpoint-restored: CHECKPOINT: AGT-1 implement: the session of run a1 was killed mid-work (its runner) after 2 checkpoints, but the stage's next session (run a2)"},
		{"a sweep found leftovers", func(_ []*agentSession, a *agentRunner, _ *snapshot) { a.swept = []string{"a1 (2 processes)"} },
			"no-orphan-agent-process: ORPHAN agent process: session a1 (2 processes): the runner's start-up sweep killed what it left"},
		{"alive at the end", func(_ []*agentSession, _ *agentRunner, sn *snapshot) {}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ss := good()
			p := strings.Join(check(t, ss, func(a *agentRunner, sn *snapshot) { c.edit(ss, a, sn) }), "\n")
			want := c.want
			if want == "" {
				want = fmt.Sprintf("no-orphan-agent-process: ORPHAN agent process: run a2 of AGT-1 (): pid %d", orphan.Process.Pid)
			}
			if !strings.Contains(p, want) {
				t.Fatalf("problems do not say %q:\n%s", want, p)
			}
		})
	}
}

// A dead job explains an escalation only when Core went down during it at
// least once per attempt and its last lease expired.
func TestKilledEachClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	downs := func(n int) []outage {
		var out []outage
		for i := range n {
			out = append(out, outage{What: "core", From: t0.Add(time.Duration(i+1) * time.Second), To: t0.Add(time.Duration(i+1)*time.Second + 100*time.Millisecond)})
		}
		return append(out, outage{What: "runner", From: t0.Add(time.Second)})
	}
	job := dbJob{Status: "dead", LastError: "lease expired 3 times in a row (the limit for 1 attempts), the last during attempt 5", Attempt: 5,
		Expiries: 3, CreatedAt: t0.UnixMilli(), FinishedAt: t0.Add(time.Minute).UnixMilli()}
	for _, c := range []struct {
		name string
		j    dbJob
		outs []outage
		want bool
	}{
		{"a kill per lost claim", job, downs(3), true},
		{"fewer kills than lost claims", job, downs(2), false},
		{"another error", func() dbJob { j := job; j.LastError = "gitea: 500"; return j }(), downs(5), false},
		{"kills after it died", func() dbJob { j := job; j.FinishedAt = t0.Add(1500 * time.Millisecond).UnixMilli(); return j }(), downs(3), false},
	} {
		s := &suite{outages: c.outs}
		if got := s.killedEachClaim(c.j); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
