package flow_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/knowledge/client/clientfake"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// knowledgePipeline's one agent stage names two entries: one of the
// default space, one of the space ops.
var knowledgePipeline = map[string]any{"stages": []any{
	map[string]any{"id": "build", "kind": "agent", "knowledge": []string{"conventions/go", "ops:deploy"}},
}}

// knowledgeWorld is a world whose flow engine reads entries from a fake
// Knowledge service holding both entries of knowledgePipeline.
func knowledgeWorld(t *testing.T, s store.Store) (*world, *clientfake.Fake) {
	w := newWorld(t, s, map[string]map[string]any{"task": knowledgePipeline})
	fake := clientfake.Start(t, apitest.ServiceToken)
	fake.Put("acme", client.Entry{Slug: "conventions/go", Title: "Go", Body: "Wrap errors."})
	fake.Put("acme", client.Entry{Slug: "conventions/go", Title: "Go", Body: "Wrap every error." + strings.Repeat("é", flow.MaxKnowledgeBody)})
	fake.Put("acme", client.Entry{Space: "ops", Slug: "deploy", Title: "Deploy", Body: "Deploy on Tuesdays."})
	c, err := client.New(client.Options{URL: fake.URL, Token: apitest.ServiceToken})
	if err != nil {
		t.Fatal(err)
	}
	w.Core.Flows.Knowledge, w.Core.Flows.KnowledgeWait = c, 10*time.Minute
	return w, fake
}

type sessionEntry struct {
	Space, Slug, Title, Body string
	Version                  int64
	Cut                      bool
}

// TestStageKnowledgeInTheRun: entering a stage that names entries fetches
// them into its run's artifacts, and the lease hands them to the session
// (an entry's body cut at MaxKnowledgeBody).
func TestStageKnowledgeInTheRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w, _ := knowledgeWorld(t, s)
		key := w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		f := w.wantFlow(key, "build it=1 step=1 running/run")
		var a flow.Artifacts
		if err := json.Unmarshal(w.run(f.RunID).Artifacts, &a); err != nil {
			t.Fatal(err)
		}
		if len(a.Knowledge) != 2 || a.Knowledge[0].Slug != "conventions/go" || a.Knowledge[0].Version != 2 || !a.Knowledge[0].Cut ||
			len(a.Knowledge[0].Body) > flow.MaxKnowledgeBody || !strings.HasPrefix(a.Knowledge[0].Body, "Wrap every error.") ||
			a.Knowledge[1].Space != "ops" || a.Knowledge[1].Body != "Deploy on Tuesdays." || a.Knowledge[1].Cut {
			t.Fatalf("artifacts' knowledge: %+v", a.Knowledge)
		}
		r := w.lease(key, "build", 1)
		var ss struct{ Knowledge []sessionEntry }
		if err := json.Unmarshal(r.Session, &ss); err != nil {
			t.Fatal(err)
		}
		if len(ss.Knowledge) != 2 || ss.Knowledge[1] != (sessionEntry{Space: "ops", Slug: "deploy", Title: "Deploy", Body: "Deploy on Tuesdays.", Version: 1}) ||
			!ss.Knowledge[0].Cut {
			t.Fatalf("session's knowledge: %+v", ss.Knowledge)
		}
	})
}

// TestStageKnowledgeUnavailable: with the Knowledge service down, entering
// the stage changes nothing and snoozes, with backoff, on the fake clock;
// past [knowledge] wait since the stage was entered, the flow is flagged
// with a blocking question (never started without its entries). Once the
// service is back, the answer runs the stage with them.
func TestStageKnowledgeUnavailable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w, fake := knowledgeWorld(t, s)
		fake.SetDown(true)
		key := w.ticket("task")
		entered := w.flow(key).UpdatedAt
		var retries []time.Duration
		for range 30 {
			seq, before := w.seq(), w.snapshot()
			err := w.step(flow.JobEnter, key)
			d, snoozed := job.SnoozedFor(err)
			if !snoozed {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
			if len(w.since(seq)) != 0 || w.snapshot() != before {
				t.Fatalf("a snoozed enter changed something: %v", types(w.since(seq)))
			}
			retries = append(retries, d)
			w.clk.Advance(d)
		}
		// 2 s, then as long as it waited so far, at most a minute, never
		// past the wait.
		if len(retries) < 10 || retries[0] != 2*time.Second || retries[1] != 2*time.Second || retries[2] != 4*time.Second ||
			retries[len(retries)-2] != time.Minute {
			t.Fatalf("retries %v", retries)
		}
		if waited := w.clk.Now().Sub(entered); waited != 10*time.Minute {
			t.Fatalf("flagged after %s, want 10m0s exactly", waited)
		}
		f := w.wantFlow(key, "build it=1 step=1 waiting/answer")
		if f.RunID != "" || w.count(`SELECT COUNT(*) FROM runs`) != 0 {
			t.Fatal("a run was created without its entries")
		}
		w.wantTicket(key, "waiting_for_answer")
		if qs := w.openQuestions(key); len(qs) != 1 || !strings.Contains(qs[0], "the knowledge entries of stage build could not be fetched for 10m0s") {
			t.Fatalf("questions %q", qs)
		}

		// The service is back: the answer resumes the stage, which runs with
		// its entries.
		fake.SetDown(false)
		w.answerAll(key)
		w.mustStep(flow.JobResume, "")
		w.mustStep(flow.JobEnter, key)
		f = w.wantFlow(key, "build it=1 step=2 running/run")
		var a flow.Artifacts
		if err := json.Unmarshal(w.run(f.RunID).Artifacts, &a); err != nil || len(a.Knowledge) != 2 {
			t.Fatalf("artifacts after the answer: %+v %v", a.Knowledge, err)
		}
	})
}

// TestStageKnowledgeMissing: an entry the service does not have flags the
// flow at once (flow.stuck, a blocking question naming it); creating it
// and answering runs the stage.
func TestStageKnowledgeMissing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": {"stages": []any{
			map[string]any{"id": "build", "kind": "agent", "knowledge": []string{"conventions/go", "adr/missing"}},
		}}})
		fake := clientfake.Start(t, apitest.ServiceToken)
		fake.Put("acme", client.Entry{Slug: "conventions/go", Title: "Go", Body: "Wrap errors."})
		w.Core.Flows.Knowledge, _ = client.New(client.Options{URL: fake.URL, Token: apitest.ServiceToken})
		key := w.ticket("task")
		seq := w.seq()
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "build it=1 step=1 waiting/answer")
		evs := w.since(seq)
		wantTypes(t, evs, "flow.stuck", "question.asked", "ticket.state_changed")
		if r, _ := evs[0].P["reason"].(string); !strings.Contains(r, "stage build names the knowledge entry adr/missing, which the Knowledge service of acme does not have") {
			t.Fatalf("reason %q", r)
		}
		if w.count(`SELECT COUNT(*) FROM runs`) != 0 {
			t.Fatal("a run was created without its entries")
		}
		fake.Put("acme", client.Entry{Slug: "adr/missing", Title: "ADR", Body: "Decided."})
		w.answerAll(key)
		w.mustStep(flow.JobResume, "")
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "build it=1 step=2 running/run")
	})
}

// TestKnowledgeRetry: the backoff between tries, never past the wait.
func TestKnowledgeRetry(t *testing.T) {
	for _, c := range []struct{ waited, left, want time.Duration }{
		{0, 10 * time.Minute, 2 * time.Second},
		{3 * time.Second, 10 * time.Minute, 3 * time.Second},
		{5 * time.Minute, 5 * time.Minute, time.Minute},
		{9*time.Minute + 30*time.Second, 30 * time.Second, 30 * time.Second},
		{10 * time.Minute, 0, time.Second},
	} {
		if got := flow.KnowledgeRetry(c.waited, c.left); got != c.want {
			t.Errorf("KnowledgeRetry(%s, %s) = %s, want %s", c.waited, c.left, got, c.want)
		}
	}
}
