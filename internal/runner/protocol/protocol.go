// Package protocol is the runner's side of the runner protocol (version 2):
// the JSON bodies Core and `ballet runner` exchange, field for field, and a
// Client for the routes the runner calls. It knows nothing of Core's
// internals; docs/runners.md describes the protocol.
//
// Secrets — the runner token, run tokens, a repository credential — travel
// in headers and bodies only: no error of this package holds one.
package protocol

import "time"

// The adapters (stage field adapter).
const (
	ClaudeCode = "claude-code"
	OpenCode   = "opencode"
)

// Adapter is an agent CLI a runner can run, with its --version.
type Adapter struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Registration is the body of POST /api/v1/runners.
type Registration struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity int               `json:"capacity"`
	Adapters []Adapter         `json:"adapters"`
	Version  string            `json:"version,omitempty"`
	// Problem, when set, says why the runner cannot run sessions now.
	Problem string `json:"problem,omitempty"`
}

// Runner is a registered runner, as Core answers it.
type Runner struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels"`
	Capacity   int               `json:"capacity"`
	Adapters   []Adapter         `json:"adapters"`
	Version    string            `json:"version"`
	Problem    string            `json:"problem"`
	Sessions   []string          `json:"sessions"`
	Alive      bool              `json:"alive"`
	LastSeenAt time.Time         `json:"last_seen_at"`
}

// Heartbeat is the body of POST /api/v1/runners/{runner}/heartbeat.
type Heartbeat struct {
	Sessions []string `json:"sessions"` // the runs whose sessions run now
	Draining bool     `json:"draining"`
	Problem  string   `json:"problem,omitempty"`
}

// HeartbeatAnswer is the runner plus the runs among Heartbeat.Sessions to
// stop at once (cancelled, or no longer this runner's).
type HeartbeatAnswer struct {
	Runner
	Cancel []string `json:"cancel"`
}

// LeaseRequest is the body of POST /api/v1/runners/{runner}/lease.
type LeaseRequest struct {
	WaitSeconds int      `json:"wait_seconds"`
	Adapters    []string `json:"adapters,omitempty"`
}

// Lease is a leased run: the run, its run token and what its session
// needs.
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
}

// The statuses of a finished run.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// EndedWithOutcome reports whether a finished run ended its stage with an
// outcome (the session reported and succeeded, with no blocking question
// pending): the stage's checkpoint is then of no more use.
func (r Run) EndedWithOutcome() bool {
	return r.Status == StatusSucceeded && r.Outcome != "" && !r.BlockingQuestion
}

// Session is what a session needs, as the lease carries it.
type Session struct {
	Ticket            Ticket     `json:"ticket"`
	Stage             Stage      `json:"stage"`
	Skills            []Skill    `json:"skills"`
	PreviousReport    *Report    `json:"previous_report"`
	AnsweredQuestions []Answered `json:"answered_questions"`
	Knowledge         []Entry    `json:"knowledge"`
	Repository        *Repo      `json:"repository"`
	Credential        *Secret    `json:"credential"`
	MCP               MCP        `json:"mcp"`
	Log               LogLimit   `json:"log"`
}

// Ticket is the ticket a session works on.
type Ticket struct {
	Key                string `json:"key"`
	Type               string `json:"type"`
	Title              string `json:"title"`
	Description        string `json:"description"`
	AcceptanceCriteria string `json:"acceptance_criteria"`
}

// Stage is the stage a session runs.
type Stage struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Instructions   string `json:"instructions"`
	Adapter        string `json:"adapter"`
	Model          string `json:"model"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	Iteration      int    `json:"iteration"`
	MaxIterations  int    `json:"max_iterations"`
}

// Skill is a project skill the stage allows.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Content     string `json:"content"`
}

// Report is the previous stage's report.
type Report struct {
	Stage   string `json:"stage"`
	Outcome string `json:"outcome"`
	Report  string `json:"report"`
}

// Answered is a question of the ticket with its answer.
type Answered struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// Entry is an entry of the organization's knowledge that the stage names:
// Body is its first part when Cut.
type Entry struct {
	Space   string `json:"space"`
	Slug    string `json:"slug"`
	Title   string `json:"title"`
	Version int64  `json:"version"`
	Body    string `json:"body"`
	Cut     bool   `json:"cut"`
}

// Repo is the repository a session works on.
type Repo struct {
	Forge         string `json:"forge"`
	URL           string `json:"url"`
	DefaultBranch string `json:"default_branch"`
	Branch        string `json:"branch"` // ballet/<KEY>
}

// Secret is the credential for an http(s) repository. It is never logged;
// its String hides it.
type Secret struct {
	Username string `json:"username"`
	Secret   string `json:"secret"`
}

// String hides the secret from a %v of the value.
func (s Secret) String() string { return "credential for " + s.Username + " (hidden)" }

// MCP is Core's MCP endpoint for the session.
type MCP struct {
	URL string `json:"url"`
}

// LogLimit is how many bytes of a run's log Core keeps.
type LogLimit struct {
	Limit int64 `json:"limit"`
}

// Usage is a session's tokens and cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// Finish is the body of POST /api/v1/runs/{run}/finish.
type Finish struct {
	ExitStatus int    `json:"exit_status"`
	Usage      *Usage `json:"usage,omitempty"`
	Error      string `json:"error,omitempty"`
	// BranchAhead is how many commits the ticket's branch has ahead of the
	// default branch after the session's work was pushed (0: nothing to
	// review; nil: not known, as when the workspace could not be read).
	BranchAhead *int `json:"branch_ahead,omitempty"`
}

// LogAnswer is Core's answer to a log chunk.
type LogAnswer struct {
	Size      int64 `json:"size"`
	Truncated bool  `json:"truncated"`
}

// The limits of the protocol the runner keeps to.
const (
	MaxLogChunk   = 1 << 20  // bytes of one log upload
	MaxError      = 16 << 10 // bytes of a finish's error
	MaxLeaseWait  = 60       // seconds a lease may wait
	MaxCapacity   = 64       // sessions a runner may announce
	MaxProblem    = 1000     // characters of a problem
	MaxVersionLen = 100      // characters of the runner's version
)
