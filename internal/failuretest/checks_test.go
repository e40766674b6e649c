package failuretest

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/openapitest"
	"github.com/ballet/ballet/internal/server"
)

// world builds a small end state for the checks' own test: ticket ACME-1
// done through one agent stage and a merge, ticket ACME-2 (blocked by
// ACME-1) done after it.
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
	w.ev("ticket", id, "ticket.created", map[string]any{"state": "backlog"})
	w.ev("ticket", id, "ticket.state_changed", map[string]any{"to": "ready"})
	w.sn.items = append(w.sn.items, dbItem{ID: id, Key: key, Type: "task", State: "done", Version: 4, Number: number})
}

func (w *world) run(item, flow, run string) {
	w.ev("flow", flow, "flow.started", map[string]any{"step": 1})
	w.ev("ticket", item, "ticket.state_changed", map[string]any{"to": "in_progress"})
	w.ev("flow", flow, "flow.stage_started", map[string]any{"step": 1, "run": run})
	w.ev("run", run, "run.created", nil)
	w.ev("run", run, "run.started", nil)
	w.ev("run", run, "run.reported", nil)
	w.ev("run", run, "run.finished", nil)
	w.ev("flow", flow, "flow.stage_finished", map[string]any{"step": 1})
	w.ev("flow", flow, "flow.stage_started", map[string]any{"step": 2})
	w.ev("flow", flow, "flow.waiting", map[string]any{"step": 2, "waiting": "merge"})
	w.ev("flow", flow, "flow.done", map[string]any{"step": 2})
	w.ev("ticket", item, "ticket.state_changed", map[string]any{"to": "done"})
	w.sn.flows = append(w.sn.flows, dbFlow{ID: flow, ItemID: item, Status: "done", Stage: "integrate", Step: 2, Iteration: 1, Version: 6, StartedAt: w.seq})
	w.sn.runs = append(w.sn.runs, dbRun{ID: run, FlowID: flow, ItemID: item, Stage: "implement", Status: "succeeded", Iteration: 1, Step: 1, Version: 4})
	w.sn.jobs = append(w.sn.jobs, dbJob{ID: "t-" + run, Kind: "flow.timeout", Status: "pending", Payload: `{"flow_id":"` + flow + `","step":1}`})
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

func analyzeWorld(t *testing.T, w *world, merges map[string]int) []string {
	s := &suite{t: t, hit: map[string]bool{}}
	if merges == nil {
		merges = map[string]int{"ACME-1": 1, "ACME-2": 1}
	}
	return s.analyze(w.sn, merges)
}

// TestChecksCatchBrokenEndStates makes sure the suite's assertions bite:
// a consistent end state passes, and each kind of breakage is reported.
func TestChecksCatchBrokenEndStates(t *testing.T) {
	if p := analyzeWorld(t, newWorld(), nil); len(p) != 0 {
		t.Fatalf("a consistent end state has problems:\n%s", strings.Join(p, "\n"))
	}
	// An escalated ticket holds the ticket it blocks: not lost.
	w := newWorld()
	w.sn.flows[0].Status, w.sn.flows[0].Waiting, w.sn.items[0].State = "waiting", "answer", "waiting_for_answer"
	w.sn.flows, w.sn.runs, w.sn.items[1].State = w.sn.flows[:1], w.sn.runs[:1], "ready"
	w.sn.events = w.sn.events[:16]
	w.sn.events[14] = dbEvent{Seq: 15, EntityType: "flow", EntityID: "f1", Type: "flow.waiting", Payload: `{"step":2,"waiting":"answer"}`}
	w.sn.events[15] = dbEvent{Seq: 16, EntityType: "ticket", EntityID: "i1", Type: "ticket.state_changed", Payload: `{"to":"waiting_for_answer"}`}
	w.sn.items[1].Version = 2
	s := &suite{t: t, hit: map[string]bool{}}
	if p := s.analyze(w.sn, map[string]int{}); len(p) != 0 || s.sum.Escalated != 1 || s.sum.Held != 1 {
		t.Fatalf("escalated %d, held %d, problems:\n%s", s.sum.Escalated, s.sum.Held, strings.Join(p, "\n"))
	}
	cases := []struct {
		name   string
		break_ func(w *world) map[string]int
		want   []string
	}{
		{"seq gap", func(w *world) map[string]int {
			for i := 5; i < len(w.sn.events); i++ {
				w.sn.events[i].Seq++
			}
			return nil
		}, []string{"event seq gap: the 6-th event has seq 7"}},
		{"duplicate stage finish", func(w *world) map[string]int {
			w.ev("flow", "f1", "flow.stage_finished", map[string]any{"step": 1})
			return nil
		}, []string{"DUPLICATE: flow f1 of ACME-1: flow.stage_finished@1 twice", "version 6 but 7 flow.* events"}},
		{"repeated wait", func(w *world) map[string]int {
			w.sn.events = append(w.sn.events[:14], append([]dbEvent{w.sn.events[13]}, w.sn.events[14:]...)...)
			for i := range w.sn.events {
				w.sn.events[i].Seq = int64(i + 1)
			}
			return nil
		}, []string{"flow.waiting 2/merge twice in a row"}},
		{"state change without event", func(w *world) map[string]int {
			w.sn.items[0].Version = 5
			return nil
		}, []string{"item ACME-1: version 5 but 4 events"}},
		{"two runs created", func(w *world) map[string]int {
			w.ev("run", "r1", "run.created", nil)
			return nil
		}, []string{"DUPLICATE: run r1 of ACME-1 (implement step 1): 2 run.created events", "version 4 but 5 run.* events"}},
		{"merged twice", func(*world) map[string]int {
			return map[string]int{"ACME-1": 2, "ACME-2": 1}
		}, []string{"DUPLICATE: branch ballet/ACME-1 merged 2 times", "ACME-1 is done but its branch was merged 2 times"}},
		{"done without merge", func(*world) map[string]int {
			return map[string]int{"ACME-1": 1}
		}, []string{"ACME-2 is done but its branch was merged 0 times"}},
		{"lost ticket", func(w *world) map[string]int {
			w.sn.flows[1].Status, w.sn.flows[1].Waiting = "running", "run"
			w.sn.items[1].State = "in_progress"
			return nil
		}, []string{"LOST TICKETS", "ACME-2: ticket in_progress", "flow f2 of ACME-2 still running"}},
		{"blocker order", func(w *world) map[string]int {
			w.sn.blockers = [][2]string{{"i1", "i2"}}
			return nil
		}, []string{"ACME-1 started (seq 5) before its blocker ACME-2 was done (seq 28"}},
		{"job without reason", func(w *world) map[string]int {
			w.sn.jobs = append(w.sn.jobs, dbJob{ID: "j", Kind: "flow.enter", Status: "pending", Payload: `{"flow_id":"f1","step":3}`},
				dbJob{ID: "d", Kind: "flow.run_finished", Status: "dead", Payload: `{"flow_id":"f2"}`, LastError: "boom"})
			return nil
		}, []string{"job j flow.enter is pending without a reason", "job d flow.run_finished is dead after 0 attempts: boom"}},
		{"run left open", func(w *world) map[string]int {
			w.sn.runs[0].Status = "running"
			return nil
		}, []string{"run r1 of ACME-1 (implement step 1) is still running at the end"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			merges := c.break_(w)
			p := strings.Join(analyzeWorld(t, w, merges), "\n")
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
	api := server.NewAPI(slog.New(slog.DiscardHandler), nil, nil, 1<<20, 0)
	b, err := json.Marshal(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapitest.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{}
	w.ev("run", "r1", "run.reported", map[string]any{"outcome": "done", "summary": "ok"})
	w.ev("run", "r1", "run.reported", map[string]any{"Outcome": "done", "Summary": "ok"})
	w.ev("run", "r1", "run.napped", map[string]any{})
	s := &suite{t: t, hit: map[string]bool{}, doc: doc}
	var got []string
	for _, p := range s.analyze(w.sn, nil) {
		if strings.HasPrefix(p, "EVENT SCHEMA") {
			got = append(got, p)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], "seq 2") || !strings.Contains(got[1], "not in the catalogue") {
		t.Fatalf("problems:\n%s", strings.Join(got, "\n"))
	}
}
