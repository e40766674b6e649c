//go:build linux

package fakemodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/testkit/agenttest"
	"github.com/ballet/ballet/internal/testkit/hang"
)

// This file drives the real CLIs the way docs/agents.md says: a clean
// environment, a per-run home and config folders, stdin /dev/null, an
// own process group, Ballet's MCP server over streamable HTTP with the
// run's bearer token.

// The model the sessions ask for, and its list prices per million tokens
// (claude-code prices claude-sonnet-4-5 itself; opencode is given these).
const (
	model                                              = "claude-sonnet-4-5"
	priceIn, priceOut, priceCacheRead, priceCacheWrite = 3.0, 15.0, 0.3, 3.75
)

// cost is what a usage costs at the list prices.
func cost(u fakemodel.Usage) float64 {
	return (float64(u.Input)*priceIn + float64(u.Output)*priceOut +
		float64(u.CacheRead)*priceCacheRead + float64(u.CacheWrite)*priceCacheWrite) / 1e6
}

func sameCost(a, b float64) bool { return math.Abs(a-b) <= 1e-9+1e-9*math.Abs(b) }

// ticket is what get_ticket answers.
type ticket struct {
	Key                string `json:"key"`
	Title              string `json:"title"`
	Description        string `json:"description"`
	AcceptanceCriteria string `json:"acceptance_criteria"`
}

// mcpCall is one tool call that reached the MCP server.
type mcpCall struct {
	Tool string
	Args map[string]any
}

// mcpServer is a minimal stand-in for Core's MCP endpoint: the three tools
// the Runner issue names, each bearer token one run.
type mcpServer struct {
	URL string

	mu      sync.Mutex
	tickets map[string]ticket
	calls   map[string][]mcpCall
}

func newMCP(t *testing.T) *mcpServer {
	m := &mcpServer{tickets: map[string]ticket{}, calls: map[string][]mcpCall{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "ballet", Version: "test"}, nil)
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	s.AddTool(&mcp.Tool{
		Name:        "submit_report",
		Description: "Submit the stage's report; the session ends after it.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"outcome", "summary"}, Properties: map[string]*jsonschema.Schema{
			"outcome": {Type: "string", Enum: []any{"done", "failed", "blocked"}, Description: "how the stage ended"},
			"summary": str("what was done, for the next stage"),
		}},
	}, m.handle(func(args map[string]any) (string, error) {
		switch args["outcome"] {
		case "done", "failed", "blocked":
			return "Report recorded.", nil
		}
		return "", fmt.Errorf("outcome must be done, failed or blocked")
	}))
	s.AddTool(&mcp.Tool{
		Name:        "ask_question",
		Description: "Ask the people behind the ticket a question.",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"question", "blocking"}, Properties: map[string]*jsonschema.Schema{
			"question": str("the question"),
			"blocking": {Type: "boolean", Description: "true: the stage cannot go on without the answer; end the session"},
		}},
	}, m.handle(func(map[string]any) (string, error) { return "Question recorded.", nil }))
	s.AddTool(&mcp.Tool{
		Name:        "get_ticket",
		Description: "The ticket, its acceptance criteria, answered questions and the previous stage's report.",
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}},
	}, m.handle(nil))

	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.tickets[token]; !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/api/v1/mcp"
	return m
}

// handle records a call under its token and answers with check's text
// (get_ticket, check nil: the token's ticket as JSON).
func (m *mcpServer) handle(check func(map[string]any) (string, error)) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		token := req.Extra.TokenInfo.UserID
		var args map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
		}
		m.mu.Lock()
		m.calls[token] = append(m.calls[token], mcpCall{Tool: req.Params.Name, Args: args})
		tk := m.tickets[token]
		m.mu.Unlock()
		var text string
		if check == nil {
			b, _ := json.Marshal(tk)
			text = string(b)
		} else {
			var err error
			if text, err = check(args); err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// issue returns a new run token for a session working on tk.
func (m *mcpServer) issue(tk ticket) string {
	token := "run-" + uuid.NewString()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tickets[token] = tk
	return token
}

func (m *mcpServer) callsOf(token string) []mcpCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mcpCall(nil), m.calls[token]...)
}

// world is a fake model and an MCP server for one test.
type world struct {
	fm  *fakemodel.Server
	url string
	mcp *mcpServer
}

func newWorld(t *testing.T) *world {
	fm := fakemodel.New()
	srv := httptest.NewServer(fm)
	t.Cleanup(func() { fm.Close(); srv.Close() }) // fm first: it releases hanging requests
	return &world{fm: fm, url: srv.URL, mcp: newMCP(t)}
}

type cliKind string

const (
	claude   cliKind = "claude-code"
	opencode cliKind = "opencode"
)

// opts are a session's settings.
type opts struct {
	prompt string
	ticket ticket
	env    []string // more environment variables
	// provider (opencode): "openai" (an @ai-sdk/openai-compatible provider,
	// the default) or "anthropic" (the built-in one, base URL overridden).
	provider string
	// toolSearch (claude-code): keep the default built-in tools, so MCP
	// tools are deferred behind ToolSearch, instead of naming them with
	// --tools.
	toolSearch bool
	skills     map[string]string // skill name → SKILL.md
	// token, if set, is the bearer token the session is given instead of
	// a valid one.
	token string
}

// session is one run of a real CLI.
type session struct {
	t       *testing.T
	kind    cliKind
	dir     string // the workspace
	home    string // the per-run home
	token   string // its run token
	id      string // claude-code: its --session-id
	mark    string // BALLET_TEST_SESSION: finds its processes
	cmd     *exec.Cmd
	started time.Time

	done    chan struct{} // closed once the output ended and the process was reaped
	mu      sync.Mutex
	lines   [][]byte
	maxLine int
	stderr  syncBuffer
	elapsed time.Duration
	state   *os.ProcessState
}

// start starts a session of kind in a fresh git workspace.
func (w *world) start(t *testing.T, kind cliKind, o opts) *session {
	t.Helper()
	var bin string
	if kind == claude {
		bin = agenttest.Claude(t)
	} else {
		bin = agenttest.OpenCode(t)
		if _, err := exec.LookPath("rg"); err != nil {
			t.Fatalf("opencode needs ripgrep (rg) on PATH for its skill, grep and glob tools; without it, it downloads one "+
				"from GitHub at every fresh start (Debian: apt-get install ripgrep): %v", err)
		}
	}
	s := &session{t: t, kind: kind, dir: gitWorkspace(t), home: t.TempDir(), mark: uuid.NewString(), done: make(chan struct{})}
	if o.ticket.Key == "" {
		o.ticket = ticket{Key: "ACME-1", Title: "Add a health endpoint", Description: o.prompt, AcceptanceCriteria: "GET /health answers 200"}
	}
	s.token = w.mcp.issue(o.ticket)
	if o.token != "" {
		s.token = o.token
	}
	tmp := filepath.Join(s.home, "tmp")
	must(t, os.MkdirAll(tmp, 0o700))
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.home,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
		"BALLET_TEST_SESSION=" + s.mark,
	}
	var args []string
	if kind == claude {
		s.id = uuid.NewString()
		args, env = w.claudeCommand(t, s, o, env)
	} else {
		args, env = w.opencodeCommand(t, s, o, env)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(env, o.env...)
	cmd.Stdin = nil // /dev/null: an open stdin costs claude-code 3 s and hangs opencode
	cmd.Stderr = &s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	must(t, err)
	s.cmd, s.started = cmd, time.Now()
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // a failed test leaves nothing running
		<-s.done
		for _, pid := range markedProcs(s.mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	go s.read(out)
	return s
}

// claudeCommand is claude-code's command line and environment.
func (w *world) claudeCommand(t *testing.T, s *session, o opts, env []string) ([]string, []string) {
	config := filepath.Join(s.home, ".claude")
	for name, body := range o.skills {
		must(t, os.MkdirAll(filepath.Join(config, "skills", name), 0o700))
		must(t, os.WriteFile(filepath.Join(config, "skills", name, "SKILL.md"), []byte(body), 0o600))
	}
	mcpConfig := filepath.Join(s.home, "mcp.json")
	writeJSONFile(t, mcpConfig, map[string]any{"mcpServers": map[string]any{"ballet": map[string]any{
		"type": "http", "url": w.mcp.URL, "headers": map[string]string{"Authorization": "Bearer " + s.token},
	}}})
	env = append(env,
		"CLAUDE_CONFIG_DIR="+config,
		"ANTHROPIC_BASE_URL="+w.url,
		"ANTHROPIC_API_KEY=sk-fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_MAX_RETRIES=1",
	)
	args := []string{"-p", o.prompt,
		"--output-format", "stream-json", "--verbose",
		"--model", model,
		"--session-id", s.id,
		"--mcp-config", mcpConfig, "--strict-mcp-config",
		"--permission-mode", "acceptEdits",
		"--allowedTools", "mcp__ballet,Bash,Edit,Write,Read,Glob,Grep,Skill",
		"--no-session-persistence",
	}
	if !o.toolSearch {
		args = append(args, "--tools", "Bash,Edit,Write,Read,Glob,Grep,Skill")
	}
	return args, env
}

// opencodeCommand is opencode's command line and environment.
func (w *world) opencodeCommand(t *testing.T, s *session, o opts, env []string) ([]string, []string) {
	xdgConfig := filepath.Join(s.home, ".config")
	for name, body := range o.skills {
		must(t, os.MkdirAll(filepath.Join(xdgConfig, "opencode", "skill", name), 0o700))
		must(t, os.WriteFile(filepath.Join(xdgConfig, "opencode", "skill", name, "SKILL.md"), []byte(body), 0o600))
	}
	price := map[string]float64{"input": priceIn, "output": priceOut, "cache_read": priceCacheRead, "cache_write": priceCacheWrite}
	models := map[string]any{model: map[string]any{"name": model, "cost": price, "limit": map[string]int{"context": 200000, "output": 32000}}}
	provider, providerID := map[string]any{}, "fake"
	if o.provider == "anthropic" {
		providerID = "anthropic"
		provider[providerID] = map[string]any{"options": map[string]any{"baseURL": w.url + "/v1", "apiKey": "sk-fake-key"}, "models": models}
	} else {
		provider[providerID] = map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": w.url + "/v1", "apiKey": "sk-fake-key"}, "models": models}
	}
	config, err := json.Marshal(map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"model":       providerID + "/" + model,
		"small_model": providerID + "/" + model,
		"provider":    provider,
		"mcp": map[string]any{"ballet": map[string]any{"type": "remote", "url": w.mcp.URL, "enabled": true,
			"headers": map[string]string{"Authorization": "Bearer " + s.token}}},
		"permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "deny"},
		"autoupdate": false,
		"share":      "disabled",
		"snapshot":   false, // its own undo history, a git folder per project: Ballet's runner commits instead
	})
	must(t, err)
	env = append(env,
		"XDG_CONFIG_HOME="+xdgConfig,
		"XDG_DATA_HOME="+filepath.Join(s.home, ".local", "share"),
		"XDG_CACHE_HOME="+filepath.Join(s.home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(s.home, ".local", "state"),
		"OPENCODE_CONFIG_CONTENT="+string(config),
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_CLAUDE_CODE=1",
		"OPENCODE_DISABLE_PROJECT_CONFIG=1",
	)
	return []string{"run", "--format", "json", "--model", providerID + "/" + model, o.prompt}, env
}

// read collects the NDJSON output with a reader that takes lines of any
// length, then reaps the process.
func (s *session) read(out io.Reader) {
	defer close(s.done)
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if l := bytes.TrimSpace(line); len(l) > 0 {
			s.mu.Lock()
			s.lines = append(s.lines, l)
			s.maxLine = max(s.maxLine, len(l))
			s.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	err := s.cmd.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.elapsed = time.Since(s.started)
	s.state = s.cmd.ProcessState
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		fmt.Fprintf(&s.stderr, "\n(wait: %v)", err)
	}
}

// wait waits for the session to end and logs its time.
func (s *session) wait() {
	s.t.Helper()
	hang.Recv(s.t, s.done, string(s.kind)+" to exit")
	s.t.Logf("%s session: %v, exit %s", s.kind, s.elapsed.Round(time.Millisecond), s.state)
}

// exited reports whether the process has ended.
func (s *session) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the session's process group.
func (s *session) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		s.t.Fatalf("signal %v to the process group %d: %v", sig, s.cmd.Process.Pid, err)
	}
}

// exitCode is the exit status, -1 when a signal ended it.
func (s *session) exitCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.ExitCode()
}

// output returns the lines of output, each decoded as a JSON object.
func (s *session) output() []map[string]any {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range s.lines {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			s.t.Fatalf("%s printed a line that is not a JSON object (%v): %.300s", s.kind, err, l)
		}
		out = append(out, m)
	}
	return out
}

// describe is the session's output and stderr, for failure messages.
func (s *session) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, l := range s.lines {
		fmt.Fprintf(&b, "  %.600s\n", l)
	}
	fmt.Fprintf(&b, "stderr:\n%.4000s", s.stderr.String())
	return b.String()
}

// claudeResult is claude-code's last line.
type claudeResult struct {
	Type           string  `json:"type"`
	Subtype        string  `json:"subtype"`
	IsError        bool    `json:"is_error"`
	TerminalReason string  `json:"terminal_reason"`
	Result         string  `json:"result"`
	SessionID      string  `json:"session_id"`
	NumTurns       int     `json:"num_turns"`
	TotalCostUSD   float64 `json:"total_cost_usd"`
	Usage          struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
	PermissionDenials []json.RawMessage `json:"permission_denials"`
}

// result returns claude-code's result line; ok is false when there is
// none, and the test fails when it is not the last line.
func (s *session) result() (claudeResult, bool) {
	s.t.Helper()
	s.mu.Lock()
	lines := s.lines
	s.mu.Unlock()
	for i, l := range lines {
		var r claudeResult
		if json.Unmarshal(l, &r) == nil && r.Type == "result" {
			if i != len(lines)-1 {
				s.t.Errorf("claude-code's result line is not its last line:\n%s", s.describe())
			}
			return r, true
		}
	}
	return claudeResult{}, false
}

func (r claudeResult) usage() fakemodel.Usage {
	return fakemodel.Usage{Input: r.Usage.InputTokens, Output: r.Usage.OutputTokens,
		CacheRead: r.Usage.CacheReadInputTokens, CacheWrite: r.Usage.CacheCreationInputTokens}
}

// opencodeSummary is what opencode's events add up to.
type opencodeSummary struct {
	SessionID string
	Steps     int // step_finish events
	Usage     fakemodel.Usage
	Cost      float64
	Errors    []string // the error events, as JSON
}

func (s *session) opencode() opencodeSummary {
	s.t.Helper()
	var sum opencodeSummary
	for _, ev := range s.output() {
		if id, ok := ev["sessionID"].(string); ok && sum.SessionID == "" {
			sum.SessionID = id
		}
		part, _ := ev["part"].(map[string]any)
		switch ev["type"] {
		case "step_finish":
			var f struct {
				Tokens struct {
					Input  int64 `json:"input"`
					Output int64 `json:"output"`
					Cache  struct {
						Read  int64 `json:"read"`
						Write int64 `json:"write"`
					} `json:"cache"`
				} `json:"tokens"`
				Cost float64 `json:"cost"`
			}
			b, _ := json.Marshal(part)
			must(s.t, json.Unmarshal(b, &f))
			sum.Steps++
			sum.Usage.Input += f.Tokens.Input
			sum.Usage.Output += f.Tokens.Output
			sum.Usage.CacheRead += f.Tokens.Cache.Read
			sum.Usage.CacheWrite += f.Tokens.Cache.Write
			sum.Cost += f.Cost
		case "error":
			b, _ := json.Marshal(ev["error"])
			sum.Errors = append(sum.Errors, string(b))
		}
	}
	return sum
}

// served returns what the fake model saw of this session.
func (s *session) served(w *world) fakemodel.Session {
	s.t.Helper()
	id := s.id
	if s.kind == opencode {
		id = s.opencode().SessionID
	}
	fs, ok := w.fm.Session(id)
	if !ok {
		s.t.Fatalf("the fake model saw no session %q; it saw %+v\n%s", id, w.fm.Sessions(), s.describe())
	}
	return fs
}

// gitWorkspace is a git repository with one commit.
func gitWorkspace(t *testing.T) string {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.name", "Test"},
		{"config", "user.email", "test@example.com"},
		{"commit", "-q", "--allow-empty", "-m", "start"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// changes lists the workspace's changed and new files (git status).
func changes(t *testing.T, dir string) []string {
	out, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=all").Output()
	must(t, err)
	var files []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" {
			files = append(files, l)
		}
	}
	return files
}

// proc is a live process.
type proc struct {
	pid, ppid, pgid, sid int
	cmd                  string
}

// procs returns every live process (zombies left out: they are dead and
// wait to be reaped).
func procs() []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp session …": comm may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		p := proc{pid: pid, cmd: string(stat[bytes.IndexByte(stat, '(')+1 : i])}
		p.ppid, _ = strconv.Atoi(f[1])
		p.pgid, _ = strconv.Atoi(f[2])
		p.sid, _ = strconv.Atoi(f[3])
		out = append(out, p)
	}
	return out
}

// sessionProcs returns the live processes whose environment holds
// BALLET_TEST_SESSION=mark: the session's CLI and everything it started,
// wherever they went (another process group or session, reparented to
// init).
func sessionProcs(mark string) []proc {
	want := []byte("BALLET_TEST_SESSION=" + mark + "\x00")
	var out []proc
	for _, p := range procs() {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "environ"))
		if err == nil && bytes.Contains(env, want) {
			out = append(out, p)
		}
	}
	return out
}

func markedProcs(mark string) []int {
	var pids []int
	for _, p := range sessionProcs(mark) {
		pids = append(pids, p.pid)
	}
	return pids
}

// killTree sends sig to the process group of root and to the process group
// of every descendant of root: a CLI that starts its tools in sessions of
// their own (opencode) is stopped whole.
func killTree(root int, sig syscall.Signal) {
	all := procs()
	groups := map[int]bool{root: true}
	tree := map[int]bool{root: true}
	for grew := true; grew; {
		grew = false
		for _, p := range all {
			if tree[p.ppid] && !tree[p.pid] {
				tree[p.pid], groups[p.pgid], grew = true, true, true
			}
		}
	}
	for g := range groups {
		_ = syscall.Kill(-g, sig)
	}
}

// noOrphans waits until no process of the session is left.
func (s *session) noOrphans() {
	s.t.Helper()
	hang.WaitFor(s.t, "the session's processes to end", func() bool { return len(markedProcs(s.mark)) == 0 })
}

// syncBuffer keeps the first MiB written to it; safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if room := 1<<20 - s.b.Len(); room > 0 {
		s.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeJSONFile(t *testing.T, path string, v any) {
	b, err := json.Marshal(v)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o600))
}
