package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/runproto"
)

// fakeCore plays Core's side of the runner protocol (version 2,
// docs/runners.md) for the runner's tests: the runner routes, the run
// routes and the MCP endpoint the sessions call. It records everything it
// is sent. The end-to-end tests with the real Core swap it for Core; the
// tests talk to it only through the methods below.
type fakeCore struct {
	t           testing.TB
	URL         string
	runnerToken string
	logLimit    int64 // what it keeps of a run's log

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	runners  []*fcRunner
	queue    []*fcRun
	runs     map[string]*fcRun
	byToken  map[string]*fcRun
	requests []fcRequest
	// refuse, when set, answers every runner route with this status.
	refuse int
	// overloaded, when > 0, answers that many next lease calls 503.
	overloaded int
	// finishRefuse answers the next finishes with these statuses, one
	// each, before it takes one.
	finishRefuse []int
	samples      int
	// down, while set, plays a Core that is down for the runner's routes
	// (/runners, /runs): its status for each call (503: Core restarting
	// behind a proxy), or unreachable (the connection dropped unanswered).
	down int
	// loseAnswers, per route kind ("heartbeat", "log", "usage",
	// "finish"), applies that many next calls and then answers 503: the
	// answer lost, as when Core dies right after it wrote.
	loseAnswers map[string]int
}

// unreachable is fakeCore.down for a Core nobody answers.
const unreachable = -1

type fcRequest struct {
	Method, Path string
	Status       int
	Body         string // cut to 64 KiB
	At           time.Time
}

type fcRunner struct {
	ID         string
	Reg        runproto.RunnerRegister
	Heartbeats []runproto.RunnerHeartbeatIn
	Leases     int // lease calls answered with a run
	// Polling counts its lease calls in progress: a runner killed while
	// it long-polls leaves one until the server sees its connection close.
	Polling int
}

type fcRun struct {
	ID, Token string
	Lease     runproto.Lease
	Runner    string
	LeasedAt  time.Time

	Cancel     bool // cancellation requested
	Heartbeats int
	Outcome    string
	Summary    string
	Questions  []runproto.SessionAnswer // asked (Answer "")
	Blocking   bool
	Log        []byte
	Truncated  bool
	Finishes   []fcFinish
	Usage      runproto.Usage // the last running total sent to /usage
	Status     string         // running, then the final status
	// Over: a heartbeat of its runner after its finish no longer lists
	// it — the session has ended whole (checkpoint dropped, folder gone).
	Over bool
}

// fcFinish is a finish as the fake Core took it.
type fcFinish struct {
	ExitStatus  int
	Usage       *runproto.Usage
	Error       string
	BranchAhead *int
	Interrupted string
	RetryAt     *time.Time
}

func newFakeCore(t testing.TB) *fakeCore {
	fc := &fakeCore{t: t, runnerToken: "ballet_runner_" + uuid.NewString(), logLimit: 8 << 20,
		changed: make(chan struct{}), runs: map[string]*fcRun{}, byToken: map[string]*fcRun{}, loseAnswers: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/runners", fc.register)
	mux.HandleFunc("POST /api/v1/runners/{runner}/heartbeat", fc.heartbeat)
	mux.HandleFunc("POST /api/v1/runners/{runner}/lease", fc.lease)
	mux.HandleFunc("POST /api/v1/runs/{run}/heartbeat", fc.runHeartbeat)
	mux.HandleFunc("POST /api/v1/runs/{run}/log", fc.appendLog)
	mux.HandleFunc("POST /api/v1/runs/{run}/finish", fc.finish)
	mux.HandleFunc("POST /api/v1/runs/{run}/usage", fc.reportUsage)
	mux.Handle("/api/v1/mcp", fc.mcpHandler())
	srv := httptest.NewServer(fc.record(mux))
	t.Cleanup(srv.Close)
	fc.URL = srv.URL
	return fc
}

// record keeps every request (its body cut) and its status.
func (fc *fakeCore) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		sw := &statusWriter{ResponseWriter: w, status: 200}
		fc.mu.Lock()
		down, kind := fc.down, routeKind(r.URL.Path)
		lose := kind != "" && fc.loseAnswers[kind] > 0
		if lose {
			fc.loseAnswers[kind]--
		}
		fc.mu.Unlock()
		switch {
		case down == unreachable && kind != "":
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			sw.status = 0
		case down != 0 && kind != "":
			writeError(sw, down, "Core is restarting")
		case lose:
			h.ServeHTTP(httptest.NewRecorder(), r) // applied, its answer lost
			writeError(sw, http.StatusServiceUnavailable, "the answer was lost")
		default:
			h.ServeHTTP(sw, r)
		}
		if len(b) > 64<<10 {
			b = b[:64<<10]
		}
		fc.update(func() {
			fc.requests = append(fc.requests, fcRequest{Method: r.Method, Path: r.URL.Path, Status: sw.status, Body: string(b), At: time.Now()})
		})
	})
}

// routeKind names the runner's routes an outage affects ("" for the
// others: MCP, which the session calls, not the runner).
func routeKind(path string) string {
	switch {
	case strings.HasPrefix(path, "/api/v1/runners"):
		return "runner"
	case strings.HasPrefix(path, "/api/v1/runs/"):
		return path[strings.LastIndex(path, "/")+1:]
	}
	return ""
}

// setDown starts (status ≠ 0) or ends (0) an outage of the runner's
// routes.
func (fc *fakeCore) setDown(status int) { fc.update(func() { fc.down = status }) }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// update changes the state under the lock and wakes waiters.
func (fc *fakeCore) update(f func()) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	f()
	close(fc.changed)
	fc.changed = make(chan struct{})
}

// wait waits until cond holds (checked under the lock after every change),
// failing the test after hangGuard.
func (fc *fakeCore) wait(what string, cond func() bool) {
	fc.t.Helper()
	deadline := time.After(hangGuard)
	for {
		fc.mu.Lock()
		ok, ch := cond(), fc.changed
		fc.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			fc.t.Fatalf("fake Core: waited %s for %s", hangGuard, what)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_")), "message": msg}})
}

// decode reads a JSON body strictly, as Core does.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err != io.EOF {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func bearer(r *http.Request) string {
	t, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return t
}

// runnerAuth checks the runner token (and the refusal switch).
func (fc *fakeCore) runnerAuth(w http.ResponseWriter, r *http.Request) bool {
	fc.mu.Lock()
	refuse := fc.refuse
	fc.mu.Unlock()
	switch {
	case bearer(r) != fc.runnerToken:
		writeError(w, http.StatusUnauthorized, "not a runner token")
		return false
	case refuse != 0:
		writeError(w, refuse, "refused by the test")
		return false
	}
	return true
}

func (fc *fakeCore) findRunner(id string) *fcRunner {
	for _, rn := range fc.runners {
		if rn.ID == id {
			return rn
		}
	}
	return nil
}

func (fc *fakeCore) register(w http.ResponseWriter, r *http.Request) {
	if !fc.runnerAuth(w, r) {
		return
	}
	var reg runproto.RunnerRegister
	if !decode(w, r, &reg) {
		return
	}
	if reg.Capacity == nil || *reg.Capacity < 1 || *reg.Capacity > runproto.MaxCapacity || reg.Name == "" || len(reg.Problem) > runproto.MaxProblem {
		writeError(w, http.StatusBadRequest, "capacity, name or problem out of range")
		return
	}
	id := uuid.NewString()
	fc.update(func() { fc.runners = append(fc.runners, &fcRunner{ID: id, Reg: reg}) })
	writeJSON(w, http.StatusCreated, runproto.Runner{ID: id, Name: reg.Name, Labels: reg.Labels, Capacity: *reg.Capacity,
		Adapters: reg.Adapters, Version: reg.Version, Problem: reg.Problem, Sessions: []string{}, Alive: true, LastSeenAt: time.Now()})
}

func (fc *fakeCore) heartbeat(w http.ResponseWriter, r *http.Request) {
	if !fc.runnerAuth(w, r) {
		return
	}
	var hb runproto.RunnerHeartbeatIn
	if !decode(w, r, &hb) {
		return
	}
	var a runproto.HeartbeatAnswer
	found := false
	fc.update(func() {
		rn := fc.findRunner(r.PathValue("runner"))
		if rn == nil {
			return
		}
		found = true
		rn.Heartbeats = append(rn.Heartbeats, hb)
		for _, run := range fc.runs {
			if run.Runner == rn.ID && len(run.Finishes) > 0 && !slices.Contains(hb.Sessions, run.ID) {
				run.Over = true
			}
		}
		a.Runner = runproto.Runner{ID: rn.ID, Name: rn.Reg.Name, Capacity: *rn.Reg.Capacity, Sessions: hb.Sessions, Alive: true}
		a.Cancel = []string{}
		for _, id := range hb.Sessions {
			if run := fc.runs[id]; run == nil || run.Cancel || run.Runner != rn.ID {
				a.Cancel = append(a.Cancel, id)
			}
		}
	})
	if !found {
		writeError(w, http.StatusNotFound, "no such runner")
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (fc *fakeCore) lease(w http.ResponseWriter, r *http.Request) {
	if !fc.runnerAuth(w, r) {
		return
	}
	var req runproto.LeaseRequest
	if !decode(w, r, &req) {
		return
	}
	id := r.PathValue("runner")
	fc.mu.Lock()
	known := fc.findRunner(id) != nil
	busy := fc.overloaded > 0
	if busy {
		fc.overloaded--
	}
	fc.mu.Unlock()
	switch {
	case !known:
		writeError(w, http.StatusNotFound, "no such runner")
		return
	case busy:
		writeError(w, http.StatusServiceUnavailable, "overloaded (the test says so)")
		return
	}
	fc.update(func() { fc.findRunner(id).Polling++ })
	defer fc.update(func() {
		if r := fc.findRunner(id); r != nil { // a runner the test removed meanwhile
			r.Polling--
		}
	})
	deadline := time.After(time.Duration(req.WaitSeconds) * time.Second)
	for {
		var got *fcRun
		fc.mu.Lock()
		ch := fc.changed
		for i, run := range fc.queue {
			if r.Context().Err() != nil { // the runner is gone: give it nothing
				break
			}
			if len(req.Adapters) == 0 || slices.Contains(req.Adapters, run.Lease.Session.Stage.Adapter) {
				got = run
				fc.queue = slices.Delete(fc.queue, i, i+1)
				break
			}
		}
		fc.mu.Unlock()
		if got != nil {
			fc.update(func() {
				got.Runner, got.LeasedAt, got.Status = id, time.Now(), "running"
				got.Lease.Run.Status = "running"
				if r := fc.findRunner(id); r != nil {
					r.Leases++
				}
			})
			writeJSON(w, http.StatusOK, got.Lease)
			return
		}
		select {
		case <-ch:
		case <-deadline:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// runOf finds the run of the path by its run token.
// runOf is the run of a runner-only run route (heartbeat, log, finish):
// as Core, it takes the runner token, not the run token of the lease
// (the agent session's): 403 for that, 401 for anything else.
func (fc *fakeCore) runOf(w http.ResponseWriter, r *http.Request) *fcRun {
	fc.mu.Lock()
	agent := fc.byToken[bearer(r)] != nil
	run := fc.runs[r.PathValue("run")]
	fc.mu.Unlock()
	switch {
	case agent:
		writeError(w, http.StatusForbidden, "only a runner token may do this")
		return nil
	case bearer(r) != fc.runnerToken:
		writeError(w, http.StatusUnauthorized, "not the runner token")
		return nil
	case run == nil:
		writeError(w, http.StatusNotFound, "no such run")
		return nil
	}
	return run
}

func (fc *fakeCore) runHeartbeat(w http.ResponseWriter, r *http.Request) {
	run := fc.runOf(w, r)
	if run == nil {
		return
	}
	var cancelled bool
	var status string
	fc.update(func() { run.Heartbeats++; cancelled, status = run.Cancel, run.Status })
	if status != "running" { // as Core's run.requireRunning says it
		writeError(w, http.StatusConflict, fmt.Sprintf("run %s is %s, not running", run.ID, status))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"cancelled": cancelled})
}

func (fc *fakeCore) reportUsage(w http.ResponseWriter, r *http.Request) {
	run := fc.runOf(w, r)
	if run == nil {
		return
	}
	var u runproto.Usage
	if !decode(w, r, &u) {
		return
	}
	fc.update(func() { run.Usage = u })
	writeJSON(w, http.StatusOK, runproto.Run{ID: run.ID, Status: run.Status})
}

func (fc *fakeCore) appendLog(w http.ResponseWriter, r *http.Request) {
	run := fc.runOf(w, r)
	if run == nil {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/octet-stream, not "+ct)
		return
	}
	offset, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	data, _ := io.ReadAll(r.Body)
	if err != nil || offset < 0 || len(data) > runproto.MaxLogChunk {
		writeError(w, http.StatusBadRequest, "offset must be a whole number ≥ 0; a chunk at most 1 MiB")
		return
	}
	var status int
	var ans runproto.LogAppended
	var msg string
	fc.update(func() {
		stored := int64(len(run.Log))
		if run.Truncated {
			stored = fc.logLimit
		}
		switch {
		case offset+int64(len(data)) <= stored: // a repeat
		case offset > stored:
			status, msg = http.StatusConflict, fmt.Sprintf("the log holds %d bytes; a chunk must start there", stored)
			return
		case run.Truncated:
		default:
			run.Log = append(run.Log, data[stored-offset:]...)
			if int64(len(run.Log)) > fc.logLimit {
				run.Log, run.Truncated = run.Log[:fc.logLimit], true
			}
		}
		status, ans = http.StatusOK, runproto.LogAppended{Size: int64(len(run.Log)), Truncated: run.Truncated}
	})
	if status != http.StatusOK {
		writeError(w, status, msg)
		return
	}
	writeJSON(w, status, ans)
}

func (fc *fakeCore) finish(w http.ResponseWriter, r *http.Request) {
	run := fc.runOf(w, r)
	if run == nil {
		return
	}
	var f runproto.FinishIn
	if !decode(w, r, &f) {
		return
	}
	var refuse int
	fc.update(func() {
		if len(fc.finishRefuse) > 0 {
			refuse, fc.finishRefuse = fc.finishRefuse[0], fc.finishRefuse[1:]
		}
	})
	if refuse != 0 {
		writeError(w, refuse, "the finish is refused for the test")
		return
	}
	if f.ExitStatus == nil || len(f.Error) > runproto.MaxError || !validText(f.Error) {
		writeError(w, http.StatusBadRequest, "exit_status is required; error at most 16 KiB of printable text")
		return
	}
	var answer runproto.Run
	fc.update(func() {
		pf := fcFinish{ExitStatus: *f.ExitStatus, Usage: f.Usage, Error: f.Error, BranchAhead: f.BranchAhead, Interrupted: f.Interrupted, RetryAt: f.RetryAt}
		run.Finishes = append(run.Finishes, pf)
		if run.Status == "running" {
			switch {
			case run.Cancel:
				run.Status = runproto.StatusCancelled
			case *f.ExitStatus == 0 && run.Outcome != "":
				run.Status = runproto.StatusSucceeded
			case f.Interrupted != "":
				run.Status = runproto.StatusInterrupted
			default:
				run.Status = runproto.StatusFailed
			}
		}
		answer = run.Lease.Run
		answer.Status, answer.Outcome, answer.BlockingQuestion, answer.Error = run.Status, run.Outcome, run.Blocking, f.Error
		fc.keepSample(run)
	})
	writeJSON(w, http.StatusOK, answer)
}

// samplesEnv names a folder that gets the output of every session the
// tests run, as <test>-<n>.ndjson: how the samples of package agent's
// tests were recorded (RUNNER_SAMPLES=$PWD/agent/testdata).
const samplesEnv = "RUNNER_SAMPLES"

func (fc *fakeCore) keepSample(run *fcRun) {
	dir := os.Getenv(samplesEnv)
	if dir == "" || len(run.Finishes) > 1 {
		return
	}
	fc.samples++
	name := filepath.Join(dir, fmt.Sprintf("%s-%d.ndjson", strings.ReplaceAll(fc.t.Name(), "/", "-"), fc.samples))
	if err := os.WriteFile(name, run.Log, 0o644); err != nil {
		fc.t.Errorf("keeping a sample: %v", err)
	}
}

// validText is Core's rule for stored text: UTF-8, no control characters
// but line feeds and tabs.
func validText(s string) bool {
	for _, c := range s {
		if c == '\uFFFD' || (c < 0x20 && c != '\n' && c != '\t') || (c >= 0x7f && c <= 0x9f) {
			return false
		}
	}
	return true
}

// mcpHandler is Core's MCP endpoint: submit_report, ask_question and
// get_ticket, each run token acting on its own run, refused once the run
// is finished or cancelled.
func (fc *fakeCore) mcpHandler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "ballet", Version: "test"}, nil)
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	s.AddTool(&mcp.Tool{
		Name: "submit_report", Description: "Submit the stage's report: how it ended and a summary for the next stage.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"outcome", "summary"}, Properties: map[string]*jsonschema.Schema{
			"outcome": {Type: "string", Enum: []any{"done", "failed", "blocked"}},
			"summary": str("what was done, for the next stage"),
		}},
	}, fc.tool(func(run *fcRun, args map[string]any) (string, error) {
		outcome, _ := args["outcome"].(string)
		summary, _ := args["summary"].(string)
		switch {
		case outcome != "done" && outcome != "failed" && outcome != "blocked":
			return "", fmt.Errorf("outcome must be done, failed or blocked")
		case run.Outcome != "" && (run.Outcome != outcome || run.Summary != summary):
			return "", fmt.Errorf("the run already reported")
		}
		run.Outcome, run.Summary = outcome, summary
		return "Report recorded.", nil
	}))
	s.AddTool(&mcp.Tool{
		Name: "ask_question", Description: "Ask the people behind the ticket a question.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"question", "blocking"}, Properties: map[string]*jsonschema.Schema{
			"question": str("the question"),
			"blocking": {Type: "boolean", Description: "true: the stage cannot go on without the answer; end the session"},
		}},
	}, fc.tool(func(run *fcRun, args map[string]any) (string, error) {
		q, _ := args["question"].(string)
		b, _ := args["blocking"].(bool)
		run.Questions = append(run.Questions, runproto.SessionAnswer{Question: q})
		run.Blocking = run.Blocking || b
		return "Question recorded.", nil
	}))
	s.AddTool(&mcp.Tool{
		Name: "get_ticket", Description: "The ticket, its acceptance criteria, answered questions and the previous stage's report.",
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}},
	}, fc.tool(func(run *fcRun, _ map[string]any) (string, error) {
		ss := run.Lease.Session
		b, _ := json.Marshal(map[string]any{"ticket": ss.Ticket, "answered_questions": ss.AnsweredQuestions, "previous_report": ss.PreviousReport})
		return string(b), nil
	}))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		if fc.byToken[token] == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	return auth.RequireBearerToken(verify, nil)(h)
}

// tool runs do on the token's run under the lock, refusing a run that is
// finished or cancelled.
func (fc *fakeCore) tool(do func(run *fcRun, args map[string]any) (string, error)) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
		}
		var text string
		var err error
		fc.update(func() {
			run := fc.byToken[req.Extra.TokenInfo.UserID]
			if run.Status != "running" || run.Cancel {
				err = fmt.Errorf("the run is %s: its tools are closed", map[bool]string{true: "cancelled", false: run.Status}[run.Cancel])
				return
			}
			text, err = do(run, args)
		})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// enqueue queues a run of session; the run's fields not given are filled
// in.
func (fc *fakeCore) enqueue(ss runproto.Session) *fcRun {
	if ss.MCP.URL == "" {
		ss.MCP.URL = fc.URL + "/api/v1/mcp"
	}
	if ss.Log.Limit == 0 {
		ss.Log.Limit = fc.logLimit
	}
	if ss.Stage.Adapter == "" {
		ss.Stage.Adapter = runproto.ClaudeCode
	}
	run := &fcRun{ID: uuid.Must(uuid.NewV7()).String(), Token: "ballet_run_" + strings.ReplaceAll(uuid.NewString(), "-", "")}
	run.Lease = runproto.Lease{RunToken: run.Token, Session: ss, Run: runproto.Run{
		ID: run.ID, Item: ss.Ticket.Key, Stage: ss.Stage.ID, Iteration: ss.Stage.Iteration, Adapter: ss.Stage.Adapter,
		Model: ss.Stage.Model, Status: "queued",
	}}
	fc.update(func() {
		fc.queue = append(fc.queue, run)
		fc.runs[run.ID] = run
		fc.byToken[run.Token] = run
	})
	return run
}

// cancel asks for run's cancellation, as a paused ticket does.
func (fc *fakeCore) cancel(run *fcRun) { fc.update(func() { run.Cancel = true }) }

// giveUp fails a running run whose runner went silent (Core's grace).
func (fc *fakeCore) giveUp(run *fcRun) {
	fc.update(func() {
		run.Status = runproto.StatusFailed
		delete(fc.byToken, run.Token)
	})
}

// pollsOver waits until no lease call of the runner registered n-th
// (from 0) is in progress: a run queued after that cannot go to it.
func (fc *fakeCore) pollsOver(n int) {
	fc.t.Helper()
	fc.wait("the lease calls of a killed runner to end", func() bool { return fc.runners[n].Polling == 0 })
}

// finished waits for run's first finish and returns a copy of the run.
func (fc *fakeCore) finished(run *fcRun) fcRun {
	fc.t.Helper()
	fc.wait("the run's finish", func() bool { return len(run.Finishes) > 0 })
	return fc.snapshot(run)
}

// over waits until the runner's session of run has ended whole (after
// its finish: the checkpoint dropped, the folder removed) and returns a
// copy of the run.
func (fc *fakeCore) over(run *fcRun) fcRun {
	fc.t.Helper()
	fc.wait("the run's session to be over", func() bool { return run.Over })
	return fc.snapshot(run)
}

func (fc *fakeCore) snapshot(run *fcRun) fcRun {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	c := *run
	c.Log = slices.Clone(run.Log)
	c.Finishes = slices.Clone(run.Finishes)
	c.Questions = slices.Clone(run.Questions)
	return c
}

// registered returns a copy of the runners registered so far.
func (fc *fakeCore) registered() []fcRunner {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []fcRunner
	for _, rn := range fc.runners {
		c := *rn
		c.Heartbeats = slices.Clone(rn.Heartbeats)
		out = append(out, c)
	}
	return out
}

// allRequests returns what the runner sent so far.
func (fc *fakeCore) allRequests() []fcRequest {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return slices.Clone(fc.requests)
}
