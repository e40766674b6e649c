package apitest

import (
	"context"
	"encoding/json"
	"time"
)

// StartJobs runs the job orchestrator as the leader would, until the test
// ends.
func (e *Env) StartJobs() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Core.Jobs.Run(ctx); close(done) }()
	e.T.Cleanup(func() { cancel(); Receive(e.T, done, "the orchestrator to stop") })
}

// Runner drives the runner API exactly as the Runner process will: a
// runner token, a registered runner, leases and finishes; the reports and
// questions are its agent session's, with the lease's run token.
type Runner struct {
	e     *Env
	Token string
	ID    string
}

// LeasedRun is a leased run with its run token.
type LeasedRun struct {
	ID        string          `json:"id"`
	Stage     string          `json:"stage"`
	Iteration int             `json:"iteration"`
	Item      string          `json:"item"`
	Artifacts json.RawMessage `json:"artifacts"`
	Token     string          `json:"-"`
	Session   json.RawMessage `json:"-"` // the lease's session
}

// NewRunner issues a runner token (as the platform admin) and registers a
// runner with it.
func (e *Env) NewRunner(name string) *Runner {
	e.T.Helper()
	var tok struct{ Token string }
	e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": name, "kind": "runner"}).JSON(e.T, &tok)
	var rn struct{ ID string }
	e.Must(201, tok.Token, "POST", "/api/v1/runners", map[string]any{"name": name}).JSON(e.T, &rn)
	return &Runner{e: e, Token: tok.Token, ID: rn.ID}
}

// Lease long-polls for a run (ok=false: none came within waitSeconds).
func (r *Runner) Lease(waitSeconds int) (LeasedRun, bool) {
	r.e.T.Helper()
	resp := r.e.Do(r.Token, "POST", "/api/v1/runners/"+r.ID+"/lease", map[string]any{"wait_seconds": waitSeconds})
	switch resp.Status {
	case 204:
		return LeasedRun{}, false
	case 200:
	default:
		r.e.T.Fatalf("lease: %d %s", resp.Status, resp.Body)
	}
	var l struct {
		Run      LeasedRun       `json:"run"`
		RunToken string          `json:"run_token"`
		Session  json.RawMessage `json:"session"`
	}
	resp.JSON(r.e.T, &l)
	l.Run.Token, l.Run.Session = l.RunToken, l.Session
	return l.Run, true
}

// MustLease leases a run, long-polling again until one comes, or fails
// the test after HangGuard.
func (r *Runner) MustLease() LeasedRun {
	r.e.T.Helper()
	deadline := time.Now().Add(HangGuard)
	for {
		if run, ok := r.Lease(30); ok {
			return run
		}
		if time.Now().After(deadline) {
			r.e.T.Fatalf("no run to lease after %v", HangGuard)
		}
	}
}

// Complete submits a report and finishes the run with exit status 0.
func (r *Runner) Complete(run LeasedRun, outcome, summary string) {
	r.e.T.Helper()
	r.e.Must(200, run.Token, "POST", "/api/v1/runs/"+run.ID+"/report", map[string]any{"outcome": outcome, "summary": summary})
	r.Finish(run, 0)
}

// Finish finishes the run with an exit status and some usage, as its
// runner (the runner token; the run token is the agent session's).
func (r *Runner) Finish(run LeasedRun, exit int) {
	r.e.T.Helper()
	r.e.Must(200, r.Token, "POST", "/api/v1/runs/"+run.ID+"/finish", map[string]any{"exit_status": exit,
		"usage": map[string]any{"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01}})
}

// Ask asks a question from within the run.
func (r *Runner) Ask(run LeasedRun, text string, blocking bool) string {
	r.e.T.Helper()
	var q struct{ ID string }
	r.e.Must(201, run.Token, "POST", "/api/v1/runs/"+run.ID+"/questions", map[string]any{"text": text, "blocking": blocking}).JSON(r.e.T, &q)
	return q.ID
}

// StartScheduler runs the scheduler as the leader would, until the test
// ends.
func (e *Env) StartScheduler() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Core.Scheduler.Run(ctx); close(done) }()
	e.T.Cleanup(func() { cancel(); Receive(e.T, done, "the scheduler to stop") })
}
