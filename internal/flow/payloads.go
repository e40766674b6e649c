package flow

import (
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/forge"
)

// Event payloads of flow.* events, one type per event type (Events lists
// them). Each carries the Position of the flow when the event happened.

// Events are the payload types of the events flows write.
var Events = []event.Payload{FlowStarted{}, StageStarted{}, StageFinished{}, FlowDone{}, FlowFailed{}, FlowWaiting{},
	FlowStuck{}, FlowResumed{}, FlowStopped{}, ApprovalEscalated{}, RunnerMissing{}}

func (FlowStarted) EventType() string   { return "flow.started" }
func (StageStarted) EventType() string  { return "flow.stage_started" }
func (StageFinished) EventType() string { return "flow.stage_finished" }
func (FlowDone) EventType() string      { return "flow.done" }
func (FlowFailed) EventType() string    { return "flow.failed" }
func (FlowWaiting) EventType() string   { return "flow.waiting" }
func (FlowStuck) EventType() string     { return "flow.stuck" }
func (FlowResumed) EventType() string   { return "flow.resumed" }
func (FlowStopped) EventType() string   { return "flow.stopped" }
func (ApprovalEscalated) EventType() string {
	return "flow.approval_escalated"
}
func (RunnerMissing) EventType() string { return "flow.runner_missing" }

// Position is where a flow was: its stage, iteration and step.
type Position struct {
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Step      int    `json:"step"`
}

func (p *Position) place(f Flow) { p.Stage, p.Iteration, p.Step = f.Stage, f.Iteration, f.Step }

// payload is a flow event's payload: it embeds Position.
type payload interface {
	event.Payload
	place(Flow)
}

// FlowStarted is the payload of flow.started.
type FlowStarted struct {
	Position
	Ticket          string `json:"ticket"` // the ticket's key
	Pipeline        string `json:"pipeline"`
	PipelineVersion int64  `json:"pipeline_version"`
}

// StageStarted is the payload of flow.stage_started.
type StageStarted struct {
	Position
	Kind    string `json:"kind"`
	Waiting string `json:"waiting"`       // what the stage waits for first
	Run     string `json:"run,omitempty"` // an agent stage's run
}

// StageFinished is the payload of flow.stage_finished: the stage's outcome
// and where the flow goes next.
type StageFinished struct {
	Position
	Outcome       string `json:"outcome"`
	Report        string `json:"report"`
	Reason        string `json:"reason"`
	Next          string `json:"next,omitempty"`           // the next stage (flow.stage_finished)
	NextIteration int    `json:"next_iteration,omitempty"` // its iteration
	// Head is the head commit of the ticket's branch that the person who
	// approved or rejected a human stage saw (omitted: none was named).
	Head string `json:"head,omitempty"`
}

// FlowDone is the payload of flow.done: the last stage's outcome.
type FlowDone StageFinished

// FlowFailed is the payload of flow.failed: the outcome that failed it.
type FlowFailed StageFinished

// FlowStuck is the payload of flow.stuck: what it waits for (an answer)
// and why it is stuck.
type FlowStuck FlowWaiting

// FlowWaiting is the payload of flow.waiting.
type FlowWaiting struct {
	Position
	Waiting     string             `json:"waiting"`
	Reason      string             `json:"reason"`
	Outcome     string             `json:"outcome,omitempty"`      // the last stage outcome, when waiting for an answer after one
	Question    string             `json:"question,omitempty"`     // the blocking question asked, when one was
	PullRequest *forge.PullRequest `json:"pull_request,omitempty"` // a merge stage's pull request
	// Until: waiting for the provider, when its limit is expected to have
	// passed and the stage runs again by itself.
	Until *time.Time `json:"until,omitempty"`
}

// FlowResumed is the payload of flow.resumed.
type FlowResumed struct {
	Position
	Reason string `json:"reason"`
}

// FlowStopped is the payload of flow.stopped.
type FlowStopped struct {
	Position
	Reason      string `json:"reason"`
	TicketState string `json:"ticket_state"`
}

// ApprovalEscalated is the payload of flow.approval_escalated: the flow
// still waited for the approval of its human stage after the project's
// escalate_after, and the project's admins are told
// (docs/notifications.md).
type ApprovalEscalated struct {
	Position
	Ticket string    `json:"ticket"` // the ticket's key
	Since  time.Time `json:"since"`  // when the stage started waiting
	After  string    `json:"after"`  // the escalate_after that passed, e.g. "4h0m0s"
}

// RunnerMissing is the payload of flow.runner_missing: the flow's agent
// stage waits for a runner and none takes its run (no live runner with the
// stage's adapter, or none leased it within [runs] unclaimed_after).
// Recorded once per queued run.
type RunnerMissing struct {
	Position
	Ticket  string `json:"ticket"` // the ticket's key
	Run     string `json:"run"`
	Adapter string `json:"adapter"`
}
