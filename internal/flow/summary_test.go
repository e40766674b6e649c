package flow_test

import (
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestSummariesCarryTheCostSoFar: a board's flow summary says what the
// ticket's runs cost so far, summed over every run of every flow of the
// ticket, in the summaries' one read; a ticket whose flow has not run yet
// costs nothing, and the board's listing shows the same.
func TestSummariesCarryTheCostSoFar(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		rc := &readCounter{Store: s}
		w := newWorld(t, rc, map[string]map[string]any{"task": loopPipeline})
		spent := w.ticket("task")
		w.mustStep(flow.JobEnter, spent)
		// Two runs: build, rejected at review, build again (0.01 each, the
		// test runner's usage).
		w.runner.Complete(w.lease(spent, "build", 1), "done", "built")
		w.mustStep(flow.JobRunFinished, spent)
		w.mustStep(flow.JobEnter, spent)
		w.Admin(200, "POST", "/api/v1/items/"+spent+"/flow/reject", map[string]any{"comment": "again"})
		w.mustStep(flow.JobEnter, spent)
		w.runner.Complete(w.lease(spent, "build", 2), "done", "built again")
		w.mustStep(flow.JobRunFinished, spent)
		// Micro-dollars add up exactly.
		spentID := w.item(spent).ID
		w.exec(`UPDATE runs SET cost_micros = cost_micros + 5 WHERE item_id = ?`, spentID)
		fresh := w.ticket("task")
		freshID := w.item(fresh).ID

		// Only the call's own reads count (Core's loops read meanwhile).
		rc.takeMarked()
		sums, err := w.Core.Flows.Summaries(marked(t.Context()), []string{spentID, freshID, "no-such-item"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rc.takeMarked()); n != 1 {
			t.Fatalf("the summaries of three items took %d reads, want one", n)
		}
		if got, want := sums[spentID].CostUSD, float64(2*10_000+2*5)/1e6; got != want {
			t.Errorf("%s cost so far $%v, want $%v", spent, got, want)
		}
		if got := sums[freshID]; got.CostUSD != 0 || got.Stage != "build" {
			t.Errorf("a ticket that never ran: %+v", got)
		}
		if _, ok := sums["no-such-item"]; ok {
			t.Error("an unknown item has a summary")
		}

		var list struct {
			Items []struct {
				Key  string
				Flow *struct {
					CostUSD float64 `json:"cost_usd"`
				}
			}
		}
		w.Admin(200, "GET", "/api/v1/projects/ACME/items", nil).JSON(t, &list)
		costs := map[string]float64{}
		for _, it := range list.Items {
			if it.Flow != nil {
				costs[it.Key] = it.Flow.CostUSD
			}
		}
		if costs[spent] != 0.02001 || costs[fresh] != 0 {
			t.Fatalf("the board's costs so far: %v", costs)
		}
	})
}
