package failuretest

import (
	"encoding/json"
	"fmt"
)

// The event types the suite reads, arms fault points at ("commit:" + type,
// see internal/fault) and checks: every one of them is written here and
// nowhere else in the suite.
const (
	evFlowStarted       = "flow.started"
	evFlowStageStarted  = "flow.stage_started"
	evFlowStageFinished = "flow.stage_finished"
	evFlowWaiting       = "flow.waiting"
	evFlowDone          = "flow.done"
	evFlowFailed        = "flow.failed"
	evFlowResumed       = "flow.resumed"
	evFlowStuck         = "flow.stuck"
	evFlowStopped       = "flow.stopped"

	evRunCreated  = "run.created"
	evRunStarted  = "run.started"
	evRunReported = "run.reported"
	evRunFinished = "run.finished"

	evTicketCreated      = "ticket.created"
	evTicketStateChanged = "ticket.state_changed"
)

// The families of event types the checks match by their part: a flow's
// events ("flow." + …), and an item's (a ticket's or an epic's: "… .created",
// "… .state_changed"; its blocker changes, "… .blocker_…", bump no version).
const (
	flowEvents       = "flow."
	itemCreated      = ".created"
	itemStateChanged = ".state_changed"
	itemBlocker      = ".blocker_"
)

// The entity types of the events the checks read.
const (
	entityFlow   = "flow"
	entityRun    = "run"
	entityTicket = "ticket"
)

// commitPoint prefixes an event type to name the fault point right after a
// transition recording such an event committed (internal/transition).
const commitPoint = "commit:"

// onceEach are the flow transitions a flow makes at most once per step.
var onceEach = map[string]bool{evFlowStarted: true, evFlowStageStarted: true, evFlowStageFinished: true, evFlowDone: true,
	evFlowFailed: true, evFlowResumed: true, evFlowStuck: true, evFlowStopped: true}

// The job kinds the checks know a reason for (see the check jobs-have-a-reason).
const (
	jobFlowTimeout = "flow.timeout"
	jobFlowMerge   = "flow.merge"
)

// payload holds the fields of an event's payload that the suite reads.
type payload struct {
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Step      int    `json:"step"`
	Run       string `json:"run"`
	Waiting   string `json:"waiting"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
	Ticket    string `json:"ticket"`
	To        string `json:"to"`
	State     string `json:"state"`
}

// dbEvent is a row of the event log.
type dbEvent struct {
	Seq                  int64
	EntityType, EntityID string
	Type                 string
	Payload              string
}

func (e dbEvent) p() payload {
	var p payload
	_ = json.Unmarshal([]byte(e.Payload), &p)
	return p
}

func (e dbEvent) String() string {
	pl := e.Payload
	if len(pl) > 300 {
		pl = pl[:300] + "…"
	}
	return fmt.Sprintf("seq %d %s %s/%s %s", e.Seq, e.Type, e.EntityType, e.EntityID, pl)
}
