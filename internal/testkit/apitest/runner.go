package apitest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// StartJobs runs the job orchestrator as the leader would, until the test
// ends.
func (e *Env) StartJobs() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Core.Jobs.Run(ctx); close(done) }()
	e.T.Cleanup(func() { cancel(); Receive(e.T, done, "the orchestrator to stop") })
}

// Caller sends one request to Core and returns the answer's status and
// body: Env.Call in the test's process, or, in the failure suite's runner
// process, a client that retries while Core restarts.
type Caller interface {
	Call(token, method, path string, body any) (status int, answer []byte)
}

// Call is Do as a Caller.
func (e *Env) Call(token, method, path string, body any) (int, []byte) {
	e.T.Helper()
	r := e.Do(token, method, path, body)
	return r.Status, r.Body
}

// Protocol speaks the runner protocol as `ballet runner` does, with
// runproto's bodies, over any Caller: the one test runner of the API tests
// (Runner) and of the failure suite's runner process. It reports what
// Core answered and leaves the verdict to its caller.
type Protocol struct {
	C     Caller
	Token string // the runner token
	ID    string // the registered runner ("" before Register)
}

// Register registers a runner named name (201 sets ID).
func (p *Protocol) Register(name string) (int, []byte) {
	status, b := p.C.Call(p.Token, "POST", "/api/v1/runners", runproto.RunnerRegister{Name: name})
	var rn struct{ ID string }
	if status == 201 && json.Unmarshal(b, &rn) == nil {
		p.ID = rn.ID
	}
	return status, b
}

// Lease long-polls up to wait seconds for a run of adapters (none: every
// adapter the runner registered). ok is a 200 whose body decoded into l.
func (p *Protocol) Lease(wait int, adapters ...string) (l LeasedRun, ok bool, status int, answer []byte) {
	status, answer = p.C.Call(p.Token, "POST", "/api/v1/runners/"+p.ID+"/lease", runproto.LeaseRequest{WaitSeconds: wait, Adapters: adapters})
	if status != 200 {
		return LeasedRun{}, false, status, answer
	}
	var body struct {
		Run      LeasedRun       `json:"run"`
		RunToken string          `json:"run_token"`
		Session  json.RawMessage `json:"session"`
	}
	if json.Unmarshal(answer, &body) != nil {
		return LeasedRun{}, false, status, answer
	}
	body.Run.Token, body.Run.Session = body.RunToken, body.Session
	return body.Run, true, status, answer
}

// Heartbeat keeps the run alive, as its runner; cancelled: Core asks its
// session to stop (ok: a 200 that decoded).
func (p *Protocol) Heartbeat(runID string) (cancelled, ok bool, status int, answer []byte) {
	status, answer = p.C.Call(p.Token, "POST", "/api/v1/runs/"+runID+"/heartbeat", nil)
	var hb runproto.HeartbeatReply
	ok = status == 200 && json.Unmarshal(answer, &hb) == nil
	return hb.Cancelled, ok, status, answer
}

// Report submits the stage report, as the run's agent session (its run
// token).
func (p *Protocol) Report(run LeasedRun, outcome, summary string) (int, []byte) {
	return p.C.Call(run.Token, "POST", "/api/v1/runs/"+run.ID+"/report", map[string]any{"outcome": outcome, "summary": summary})
}

// Finish ends the run with an exit status and usage (nil: none), as its
// runner.
func (p *Protocol) Finish(runID string, exit int, usage *runproto.Usage) (int, []byte) {
	return p.C.Call(p.Token, "POST", "/api/v1/runs/"+runID+"/finish", runproto.FinishIn{ExitStatus: &exit, Usage: usage})
}

// Runner drives the runner API exactly as the Runner process will: a
// runner token, a registered runner, leases and finishes; the reports and
// questions are its agent session's, with the lease's run token. Every
// answer it does not expect fails the test.
type Runner struct {
	e *Env
	Protocol
}

// LeasedRun is a leased run with its run token.
type LeasedRun struct {
	ID        string          `json:"id"`
	Stage     string          `json:"stage"`
	Iteration int             `json:"iteration"`
	Step      int             `json:"step"`
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
	r := &Runner{e: e, Protocol: Protocol{C: e, Token: tok.Token}}
	if status, b := r.Register(name); status != 201 || r.ID == "" {
		e.T.Fatalf("register runner %s: %d %s", name, status, b)
	}
	return r
}

// Lease long-polls for a run (ok=false: none came within waitSeconds).
func (r *Runner) Lease(waitSeconds int) (LeasedRun, bool) {
	r.e.T.Helper()
	l, ok, status, b := r.Protocol.Lease(waitSeconds)
	switch {
	case status == 204:
		return LeasedRun{}, false
	case !ok:
		r.e.T.Fatalf("lease: %d %s", status, b)
	}
	return l, true
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
	if status, b := r.Report(run, outcome, summary); status != 200 {
		r.e.T.Fatalf("report run %s: %d %s", run.ID, status, b)
	}
	r.Finish(run, 0)
}

// Finish finishes the run with an exit status and some usage, as its
// runner (the runner token; the run token is the agent session's).
func (r *Runner) Finish(run LeasedRun, exit int) {
	r.e.T.Helper()
	if status, b := r.Protocol.Finish(run.ID, exit, &runproto.Usage{InputTokens: 1000, OutputTokens: 200, CostUSD: 0.01}); status != 200 {
		r.e.T.Fatalf("finish run %s: %d %s", run.ID, status, b)
	}
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
