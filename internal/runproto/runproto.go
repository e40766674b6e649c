// Package runproto is the runner protocol's wire (version 2; docs/runners.md):
// the JSON bodies Core and `ballet runner` exchange, field for field, and
// the protocol's limits. Both sides import it — Core's run domain and its
// HTTP routes, the runner's client and sessions — so that no body is
// written twice. It holds wire types only: no domain logic, no HTTP, and
// nothing of Core's (a standard-library leaf, which the lint lets the
// runner's packages import).
//
// The type names are the schema names of Core's OpenAPI document.
package runproto

import "time"

// The adapters (a stage's adapter): the agent CLIs a runner can run.
const (
	ClaudeCode = "claude-code"
	OpenCode   = "opencode"
)

// The statuses of a finished run.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	// StatusInterrupted: the session ended because of infrastructure, not
	// of the agent (Reason says what): its stage runs again without
	// spending an iteration.
	StatusInterrupted = "interrupted"
)

// The reasons of an interrupted run. A runner names the ones it sees
// (FinishIn.Interrupted: ReasonRunnerDrain, ReasonSandboxStart,
// ReasonProviderLimit); Core decides the others. A Core restart is none:
// it does not end a session (its runner retries its calls until Core is
// back), and a runner that never reached Core again leaves its run to
// ReasonRunnerLost.
const (
	ReasonRunnerRestart = "runner_restart" // the runner restarted: its sessions died with it
	ReasonRunnerLost    = "runner_lost"    // the runner went silent past its grace
	ReasonRunnerDrain   = "runner_drain"   // the runner was stopped (SIGTERM) and drained its sessions
	ReasonKillSwitch    = "kill_switch"    // a platform admin pulled the kill switch
	ReasonSandboxStart  = "sandbox_start"  // the session's sandbox (or its CLI's process) could not start
	ReasonProviderLimit = "provider_limit" // the model's provider refused: rate limit, overload or quota (FinishIn.RetryAt says until when, when it said)
)

// Reasons lists every reason an interrupted run may carry.
var Reasons = []string{ReasonRunnerRestart, ReasonRunnerLost, ReasonRunnerDrain, ReasonKillSwitch, ReasonSandboxStart, ReasonProviderLimit}

// RunnerReasons are the reasons a runner may name in its finish.
var RunnerReasons = []string{ReasonRunnerDrain, ReasonSandboxStart, ReasonProviderLimit}

// The protocol's limits: Core refuses what is beyond them, the runner keeps
// within them.
const (
	MaxLogChunk  = 1 << 20  // bytes of one log upload
	MaxError     = 16 << 10 // bytes of a finish's error
	MaxLeaseWait = 60       // seconds a lease may wait (wait_seconds)
	MaxCapacity  = 64       // sessions a runner may announce
	MaxProblem   = 1000     // characters of a runner's problem
	MaxVersion   = 100      // characters of a runner's or an adapter's version
	MaxModel     = 200      // bytes of the model a finish names
)

// Adapter is an agent CLI a runner can run, with its --version.
type Adapter struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Usage is what a session consumed: its tokens and cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// RunnerRegister is the body of POST /api/v1/runners.
type RunnerRegister struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity *int              `json:"capacity,omitempty"` // 1–MaxCapacity sessions at once (absent: 1)
	// Adapters are the agent CLIs the runner can run (0–8); left out (nil):
	// every adapter (a protocol version 1 runner). An empty list is sent as
	// such (omitzero): a runner with no agent CLI can run nothing.
	Adapters []Adapter `json:"adapters,omitzero"`
	Version  string    `json:"version,omitempty"` // the runner's software version (≤ MaxVersion characters)
	Problem  string    `json:"problem,omitempty"` // why it cannot run sessions now (≤ MaxProblem characters)
	// Sessions are the runs whose sessions run now (≤ MaxCapacity). When
	// sent (a runner that starts sends an empty list), every run Core holds
	// as running on this runner and not listed ends interrupted
	// (runner_restart) at once: its session died with the runner. Left out
	// (nil): Core waits for the grace period, as with an older runner.
	Sessions []string `json:"sessions,omitzero"`
}

// RunnerHeartbeatIn is the optional body of POST
// /api/v1/runners/{runner}/heartbeat.
type RunnerHeartbeatIn struct {
	Sessions []string `json:"sessions,omitempty"` // the runs whose sessions run now
	Draining bool     `json:"draining,omitempty"` // no new leases: it is stopping
	Problem  string   `json:"problem,omitempty"`  // why it cannot run sessions now; "" clears it
}

// LeaseRequest is the optional body of POST /api/v1/runners/{runner}/lease.
type LeaseRequest struct {
	WaitSeconds int `json:"wait_seconds,omitempty"` // 0–MaxLeaseWait: how long to wait for a run
	// Adapters: only runs of these (each one the runner registered); left
	// out: every adapter it registered.
	Adapters []string `json:"adapters,omitempty"`
}

// HeartbeatReply answers POST /api/v1/runs/{run}/heartbeat: whether the
// run's session must stop.
type HeartbeatReply struct {
	Cancelled bool `json:"cancelled"` // cancellation was requested: stop and finish
}

// LogAppended answers a log upload (POST /api/v1/runs/{run}/log).
type LogAppended struct {
	Size      int64 `json:"size"`      // bytes stored
	Truncated bool  `json:"truncated"` // the log reached its limit: further chunks are dropped
}

// FinishIn is the body of POST /api/v1/runs/{run}/finish: how the session
// ended.
type FinishIn struct {
	ExitStatus *int   `json:"exit_status"` // required
	Usage      *Usage `json:"usage,omitempty"`
	Error      string `json:"error,omitempty"` // ≤ MaxError bytes
	// BranchAhead is how many commits the ticket's branch has ahead of the
	// default branch after the session's work was pushed (0 … 1000000; 0:
	// nothing to review; absent: not known, as when the workspace could not
	// be read).
	BranchAhead *int `json:"branch_ahead,omitempty"`
	// Model is the model that served the session, as its CLI's output
	// named it (≤ MaxModel bytes; absent: not known, as when the session
	// never reached the model).
	Model string `json:"model,omitempty"`
	// Interrupted, when set, says that the session ended because of the
	// runner's infrastructure, not of the agent (one of RunnerReasons): a
	// run without a successful report then ends interrupted with this
	// reason, and its stage runs again without spending an iteration.
	Interrupted string `json:"interrupted,omitempty"`
	// RetryAt, only with Interrupted provider_limit, is when the provider
	// said the limit resets (its retry-after or reset time); absent: it did
	// not say, and Core waits [runs] provider_wait.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}
