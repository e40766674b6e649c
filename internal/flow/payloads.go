package flow

import "github.com/ballet/ballet/internal/forge"

// Event payloads of flow.* events (the catalogue of every event type's
// payload is server.EventPayloads). Each carries the Position of the flow
// when the event happened.

// Position is where a flow was: its stage, iteration and step.
type Position struct {
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Step      int    `json:"step"`
}

func (p *Position) place(f Flow) { p.Stage, p.Iteration, p.Step = f.Stage, f.Iteration, f.Step }

// payload is a flow event's payload: it embeds Position.
type payload interface{ place(Flow) }

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

// StageFinished is the payload of flow.stage_finished, flow.done and
// flow.failed: the stage's outcome and where the flow goes next.
type StageFinished struct {
	Position
	Outcome       string `json:"outcome"`
	Report        string `json:"report"`
	Reason        string `json:"reason"`
	Next          string `json:"next,omitempty"`           // the next stage (flow.stage_finished)
	NextIteration int    `json:"next_iteration,omitempty"` // its iteration
}

// FlowWaiting is the payload of flow.waiting and flow.stuck.
type FlowWaiting struct {
	Position
	Waiting     string             `json:"waiting"`
	Reason      string             `json:"reason"`
	Outcome     string             `json:"outcome,omitempty"`      // the last stage outcome, when waiting for an answer after one
	Question    string             `json:"question,omitempty"`     // the blocking question asked, when one was
	PullRequest *forge.PullRequest `json:"pull_request,omitempty"` // a merge stage's pull request
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
