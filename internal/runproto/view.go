package runproto

import "time"

// The runner's reading of the answers that are Core's entities. Core
// answers a lease, a registration, a heartbeat and a finish with its own
// domain types (run.Leased, run.Run, run.Runner, run.RunnerBeat: stored
// rows with more fields, reads and rules of their own, which belong in
// Core and must not reach the runner); the runner decodes only the fields
// below. They are separate on purpose, and run's
// TestRunnerViewsReadCoresAnswers holds every field here to the JSON name
// and kind of Core's.

// Lease is a leased run as the runner reads it: the run, its run token
// (shown this once) and what its session needs.
type Lease struct {
	Run      Run     `json:"run"`
	RunToken string  `json:"run_token"`
	Session  Session `json:"session"`
}

// Run is the part of a run the runner reads.
type Run struct {
	ID               string `json:"id"`
	Item             string `json:"item"` // the ticket's key
	Stage            string `json:"stage"`
	Iteration        int    `json:"iteration"`
	Step             int    `json:"step"`
	Adapter          string `json:"adapter"`
	Model            string `json:"model"`
	Status           string `json:"status"`
	Outcome          string `json:"outcome"`
	BlockingQuestion bool   `json:"blocking_question"`
	Error            string `json:"error"`
	Reason           string `json:"reason"` // why an interrupted run was interrupted ("" otherwise)
}

// Runner is the part of a registered runner the runner reads.
type Runner struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels"`
	Capacity   int               `json:"capacity"`
	Adapters   []Adapter         `json:"adapters"`
	Version    string            `json:"version"`
	Problem    string            `json:"problem"`
	Drained    bool              `json:"drained"` // a platform admin drained it: Core leases it no run
	Sessions   []string          `json:"sessions"`
	Alive      bool              `json:"alive"`
	LastSeenAt time.Time         `json:"last_seen_at"`
}

// HeartbeatAnswer is the runner plus the runs among its heartbeat's
// sessions to stop at once (cancelled, or no longer this runner's).
type HeartbeatAnswer struct {
	Runner
	Cancel []string `json:"cancel"`
}
