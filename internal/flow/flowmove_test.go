package flow_test

import (
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// approvalPipeline ends with a human approval: approving finishes the
// ticket, rejecting fails it.
var approvalPipeline = map[string]any{"stages": []any{
	map[string]any{"id": "review", "kind": "human", "next": map[string]any{"failed": "$failed"}},
}}

// TestFlowMovesAreEnforced: the flow engine moves a ticket only through
// the tracker's rule (tracker.FlowMove). A person pauses a ticket whose
// flow waits for the final approval, and the approval arrives before the
// flow's stop job has run: finishing would move the paused ticket to done
// (or, rejected, to paused again), which the flow may not do, so the
// decision is refused and nothing changes; the stop job then stops the
// flow and the ticket stays paused.
func TestFlowMovesAreEnforced(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"task": approvalPipeline})
		key := w.ticket("task")
		w.mustStep(flow.JobEnter, key)
		w.wantFlow(key, "review it=1 step=1 waiting/approval")
		w.setTicket(key, "paused")
		seq := w.seq()
		for _, decision := range []string{"approve", "reject"} {
			r := w.Admin(409, "POST", "/api/v1/items/"+key+"/flow/"+decision, nil)
			if r.ErrorCode() != "conflict" {
				t.Fatalf("%s a paused ticket's flow: %s", decision, r.Body)
			}
		}
		if evs := w.since(seq); len(evs) != 0 {
			t.Fatalf("the refused decisions wrote %v", types(evs))
		}
		w.wantTicket(key, "paused")
		w.wantFlow(key, "review it=1 step=1 waiting/approval")
		w.mustStep(flow.JobStop, key)
		w.wantFlow(key, "review it=1 step=1 stopped/")
		w.wantTicket(key, "paused")
	})
}
