package run

import (
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/runproto"
)

// Event payloads of the run.* and runner.* events, one type per event type
// (Events lists them).

// Events are the payload types of the events the run domain writes.
var Events = []event.Payload{RunCreated{}, RunStarted{}, RunReported{}, RunQuestionAsked{}, RunFinished{}, RunCancelled{},
	RunCancelRequested{}, RunUsageRecorded{}, RunnerRegistered{}, RunnerUpdated{}, RunnerRemoved{},
	RunnerDrained{}, RunnerUndrained{}}

func (RunCreated) EventType() string         { return "run.created" }
func (RunStarted) EventType() string         { return "run.started" }
func (RunReported) EventType() string        { return "run.reported" }
func (RunQuestionAsked) EventType() string   { return "run.question_asked" }
func (RunFinished) EventType() string        { return "run.finished" }
func (RunCancelled) EventType() string       { return "run.cancelled" }
func (RunCancelRequested) EventType() string { return "run.cancel_requested" }
func (RunUsageRecorded) EventType() string   { return "run.usage_recorded" }
func (RunnerRegistered) EventType() string   { return "runner.registered" }
func (RunnerUpdated) EventType() string      { return "runner.updated" }
func (RunnerDrained) EventType() string      { return "runner.drained" }
func (RunnerUndrained) EventType() string    { return "runner.undrained" }
func (RunnerRemoved) EventType() string      { return "runner.removed" }

// RunCreated is the payload of run.created.
type RunCreated struct {
	ItemID    string `json:"item_id"`
	FlowID    string `json:"flow_id"`
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Step      int    `json:"step"`
	Adapter   string `json:"adapter"`
	Model     string `json:"model"`
}

// RunStarted is the payload of run.started: a runner leased the run.
type RunStarted struct {
	RunnerID string `json:"runner_id"`
	Runner   string `json:"runner"` // the runner's name
	TokenID  string `json:"token_id"`
	Stage    string `json:"stage"`
	Step     int    `json:"step"`
}

// RunReported is the payload of run.reported.
type RunReported struct {
	Outcome string `json:"outcome"`
	Summary string `json:"summary"`
}

// RunQuestionAsked is the payload of run.question_asked: the session asked
// a blocking question.
type RunQuestionAsked struct {
	Text     string `json:"text"`
	Blocking bool   `json:"blocking"`
}

// RunFinished is the payload of run.finished.
type RunFinished struct {
	Status           string         `json:"status"`
	Outcome          string         `json:"outcome"`     // "" when the session reported none
	ExitStatus       *int           `json:"exit_status"` // null when the session never exited (a silent run swept)
	Error            string         `json:"error"`
	Usage            runproto.Usage `json:"usage"`
	Model            string         `json:"model"` // the model that served the session, as its runner reported ("": not known)
	BlockingQuestion bool           `json:"blocking_question"`
	// Reason: why an interrupted run was interrupted (one of
	// runproto.Reasons; absent for other statuses).
	Reason string `json:"reason,omitempty"`
	// RetryAt: with reason provider_limit, when the provider said its
	// limit resets (absent: it did not say).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// RunCancelled is the payload of run.cancelled: a queued run was cancelled.
type RunCancelled struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	FlowID string `json:"flow_id"`
	Step   int    `json:"step"`
}

// RunCancelRequested is the payload of run.cancel_requested: a running
// run's runner is asked to stop.
type RunCancelRequested struct {
	Reason string `json:"reason"`
	// Interruption: the infrastructure's reason when the stop is an
	// interruption (kill_switch: the run then ends interrupted), absent
	// for a cancellation.
	Interruption string `json:"interruption,omitempty"`
}

// RunnerRegistered is the payload of runner.registered: a runner token
// registered a runner (Again: it had registered this name before, and the
// runner was updated).
type RunnerRegistered struct {
	ID       string             `json:"id"`
	Name     string             `json:"name"`
	TokenID  string             `json:"token_id"`
	Labels   map[string]string  `json:"labels"`
	Capacity int                `json:"capacity"`
	Adapters []runproto.Adapter `json:"adapters"`
	Version  string             `json:"version"`
	Problem  string             `json:"problem"`
	Again    bool               `json:"again"`
}

// RunnerUpdated is the payload of runner.updated: a runner's heartbeat
// changed whether it drains or its problem.
type RunnerUpdated struct {
	Draining bool   `json:"draining"`
	Problem  string `json:"problem"`
}

// RunUsageRecorded is the payload of run.usage_recorded: the run's runner
// reported usage beyond what was recorded (POST /runs/{run}/usage, or a
// finish of a run that had ended already). Usage is the run's new total;
// Status the run's status then.
type RunUsageRecorded struct {
	Status string         `json:"status"`
	Usage  runproto.Usage `json:"usage"`
}

// RunnerRemoved is the payload of runner.removed: the reconciler removed a
// runner that had not been seen for longer than [retention] runners
// (a runner that comes back registers again, as a new runner).
type RunnerRemoved struct {
	Name       string    `json:"name"`
	LastSeenAt time.Time `json:"last_seen_at"`
	Retention  string    `json:"retention"` // [retention] runners, e.g. "24h0m0s"
}

// RunnerDrained is the payload of runner.drained: a platform admin drained
// the runner (it leases no new run; the Sessions runs it held then go on).
type RunnerDrained struct {
	Name     string `json:"name"`
	Sessions int    `json:"sessions"`
}

// RunnerUndrained is the payload of runner.undrained: a platform admin put
// a drained runner back in service.
type RunnerUndrained struct {
	Name string `json:"name"`
}
