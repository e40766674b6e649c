package failuretest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tracker"
)

// The event types the suite reads, arms fault points at ("commit:" + type,
// see internal/fault) and checks, named by their owners' payload types
// (event.TypeOf): the suite writes no event type as a string.
var (
	evFlowStarted       = event.TypeOf[flow.FlowStarted]()
	evFlowStageStarted  = event.TypeOf[flow.StageStarted]()
	evFlowStageFinished = event.TypeOf[flow.StageFinished]()
	evFlowWaiting       = event.TypeOf[flow.FlowWaiting]()
	evFlowDone          = event.TypeOf[flow.FlowDone]()
	evFlowFailed        = event.TypeOf[flow.FlowFailed]()
	evFlowResumed       = event.TypeOf[flow.FlowResumed]()
	evFlowStuck         = event.TypeOf[flow.FlowStuck]()
	evFlowStopped       = event.TypeOf[flow.FlowStopped]()

	evRunCreated  = event.TypeOf[run.RunCreated]()
	evRunStarted  = event.TypeOf[run.RunStarted]()
	evRunReported = event.TypeOf[run.RunReported]()
	evRunFinished = event.TypeOf[run.RunFinished]()

	evTicketCreated      = event.TypeOf[tracker.TicketCreated]()
	evTicketStateChanged = event.TypeOf[tracker.TicketStateChanged]()
)

// The families of event types the checks match: a flow's events (every
// type flow.Events lists), and an item's (a ticket's or an epic's):
// created, state changed, and its blocker changes, which bump no version.
var (
	flowEvents       = typeSet(flow.Events...)
	itemCreated      = typeSet(tracker.TicketCreated{}, tracker.EpicCreated{})
	itemStateChanged = typeSet(tracker.TicketStateChanged{}, tracker.EpicStateChanged{})
	itemBlocker      = typeSet(tracker.TicketBlockerAdded{}, tracker.TicketBlockerRemoved{}, tracker.EpicBlockerAdded{},
		tracker.EpicBlockerRemoved{})
)

// typeSet is the set of the event types of payloads.
func typeSet(payloads ...event.Payload) map[string]bool {
	set := map[string]bool{}
	for _, p := range payloads {
		set[p.EventType()] = true
	}
	return set
}

// The entity types of the events the checks read: the part of their
// types before the dot.
var (
	entityFlow   = entityOf(evFlowStarted)
	entityRun    = entityOf(evRunCreated)
	entityTicket = entityOf(evTicketCreated)
)

func entityOf(eventType string) string {
	entity, _, _ := strings.Cut(eventType, ".")
	return entity
}

// commitPoint prefixes an event type to name the fault point right after a
// transition recording such an event committed (internal/transition).
const commitPoint = "commit:"

// handledPoint prefixes a job kind to name the fault point after the job's
// handler returned and before its result is recorded (internal/job).
const handledPoint = "handled:"

// onceEach are the flow transitions a flow makes at most once per step.
var onceEach = typeSet(flow.FlowStarted{}, flow.StageStarted{}, flow.StageFinished{}, flow.FlowDone{}, flow.FlowFailed{},
	flow.FlowResumed{}, flow.FlowStuck{}, flow.FlowStopped{})

// The job kinds the checks know a reason for (see the check jobs-have-a-reason).
const (
	jobFlowTimeout = flow.JobTimeout
	jobFlowMerge   = flow.JobMerge
	jobEscalate    = notify.JobEscalate
)

// payload holds the fields common to the flow events' payloads that the
// suite reads of an event whatever its type (flow.Position and the rest);
// a read of one type's payload decodes it (decode).
type payload struct {
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Step      int    `json:"step"`
	Run       string `json:"run"`
	Waiting   string `json:"waiting"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
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

// decode reads the event's payload as a P (ok false when it is of
// another type).
func decode[P event.Payload](e dbEvent) (P, bool) {
	p, ok, _ := event.Decode[P](event.Event{Seq: e.Seq, Type: e.Type, Payload: json.RawMessage(e.Payload)})
	return p, ok
}

// item is the item a ticket.created or epic.created event carries.
func (e dbEvent) item() tracker.Item {
	if p, ok := decode[tracker.TicketCreated](e); ok {
		return tracker.Item(p)
	}
	p, _ := decode[tracker.EpicCreated](e)
	return tracker.Item(p)
}

// stateChange is the change a ticket.state_changed or epic.state_changed
// event carries.
func (e dbEvent) stateChange() tracker.ItemStateChanged {
	if p, ok := decode[tracker.TicketStateChanged](e); ok {
		return tracker.ItemStateChanged(p)
	}
	p, _ := decode[tracker.EpicStateChanged](e)
	return tracker.ItemStateChanged(p)
}

func (e dbEvent) String() string {
	pl := e.Payload
	if len(pl) > 300 {
		pl = pl[:300] + "…"
	}
	return fmt.Sprintf("seq %d %s %s/%s %s", e.Seq, e.Type, e.EntityType, e.EntityID, pl)
}
