package flow_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
)

// TestJobsReadWhatOlderCoresQueued: the jobs rows stay compatible. For
// each flow.* kind, the payload an older Core wrote (a map, or run's
// FinishedPayload for flow.run_finished) decodes into the kind's Args, the
// Args write the same JSON members, and the kind and dedupe key are the
// strings the older Core built.
func TestJobsReadWhatOlderCoresQueued(t *testing.T) {
	const flowID, runID, itemID, projectID = "f1", "r1", "i1", "p1"
	enteredAt := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC).UnixMilli()
	for _, c := range []struct {
		kind, key string
		old       any // the payload as the older Core wrote it
		args      job.Args
	}{
		{"flow.enter", fmt.Sprintf("flow:%s:enter:%d", flowID, 3), map[string]any{"flow_id": flowID, "step": 3},
			flow.EnterArgs{FlowID: flowID, Step: 3}},
		{"flow.run_finished", fmt.Sprintf("flow:%s:run_finished:%d", flowID, 3), struct {
			FlowID string `json:"flow_id"`
			RunID  string `json:"run_id"`
			Step   int    `json:"step"`
		}{flowID, runID, 3}, flow.RunFinishedArgs{FlowID: flowID, RunID: runID, Step: 3}},
		{"flow.merge", fmt.Sprintf("flow:%s:merge:%d", flowID, 4), map[string]any{"flow_id": flowID, "step": 4, "entered_at": enteredAt},
			flow.MergeArgs{FlowID: flowID, Step: 4, EnteredAt: enteredAt}},
		{"flow.resume", "flow-resume:" + itemID, map[string]any{"item_id": itemID}, flow.ResumeArgs{ItemID: itemID}},
		{"flow.stop", "flow-stop:" + itemID, map[string]any{"item_id": itemID}, flow.StopArgs{ItemID: itemID}},
		{"flow.timeout", fmt.Sprintf("flow:%s:timeout:%d", flowID, 2), map[string]any{"flow_id": flowID, "step": 2},
			flow.TimeoutArgs{FlowID: flowID, Step: 2}},
		{"flow.release", "flow-release:" + projectID, map[string]any{"project_id": projectID}, flow.ReleaseArgs{ProjectID: projectID}},
		{"flow.release", "flow-release:", map[string]any{"project_id": ""}, flow.ReleaseArgs{}},
		{"flow.kill", "flow-kill", nil, flow.KillArgs{}},
	} {
		name := c.kind + " " + c.key
		spec := job.New(c.args)
		if spec.Kind != c.kind || spec.DedupeKey != c.key {
			t.Errorf("%s: the new Core queues kind %q key %q", name, spec.Kind, spec.DedupeKey)
		}
		old := []byte("{}") // job.Spec.Insert's payload for nil
		if c.old != nil {
			old, _ = json.Marshal(c.old)
		}
		decoded := reflect.New(reflect.TypeOf(c.args))
		if err := json.Unmarshal(old, decoded.Interface()); err != nil || decoded.Elem().Interface() != c.args {
			t.Errorf("%s: the old payload %s decodes into %+v (%v), want %+v", name, old, decoded.Elem().Interface(), err, c.args)
		}
		written, _ := json.Marshal(c.args)
		var was, is map[string]any
		if json.Unmarshal(old, &was) != nil || json.Unmarshal(written, &is) != nil || !reflect.DeepEqual(was, is) {
			t.Errorf("%s: the new Core writes %s, the old one wrote %s", name, written, old)
		}
	}
}

// TestExpectedStep: the step job a flow waits for, in every state; the
// reconciler re-queues it when it was lost.
func TestExpectedStep(t *testing.T) {
	updated := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	want := map[flow.State]job.Deduped{
		{Status: flow.StatusRunning, Waiting: flow.WaitNone}:     flow.EnterArgs{FlowID: "f1", Step: 2},
		{Status: flow.StatusRunning, Waiting: flow.WaitRun}:      flow.RunFinishedArgs{FlowID: "f1", RunID: "r1", Step: 2},
		{Status: flow.StatusRunning, Waiting: flow.WaitChecks}:   flow.MergeArgs{FlowID: "f1", Step: 2, EnteredAt: updated.UnixMilli()},
		{Status: flow.StatusWaiting, Waiting: flow.WaitReview}:   flow.MergeArgs{FlowID: "f1", Step: 2, EnteredAt: updated.UnixMilli()},
		{Status: flow.StatusWaiting, Waiting: flow.WaitMerge}:    flow.MergeArgs{FlowID: "f1", Step: 2, EnteredAt: updated.UnixMilli()},
		{Status: flow.StatusWaiting, Waiting: flow.WaitAnswer}:   flow.ResumeArgs{ItemID: "i1"},
		{Status: flow.StatusWaiting, Waiting: flow.WaitProvider}: flow.ProviderWaitArgs{FlowID: "f1", Step: 2},
	}
	for _, st := range flow.States {
		f := flow.Flow{ID: "f1", ItemID: "i1", Stage: "implement", Step: 2, RunID: "r1", Status: st.Status, Waiting: st.Waiting, UpdatedAt: updated}
		aw, ok := flow.ExpectedStep(f)
		if w, expected := want[st]; ok != expected || aw.Args != w || (ok && aw.What == "") {
			t.Errorf("%v: %+v %v, want %+v", st, aw, ok, w)
		}
	}
}
