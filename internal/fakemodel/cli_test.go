//go:build linux

package fakemodel_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/testkit/hang"
)

// The real claude-code and opencode CLIs against the fake model and an MCP
// server: every scenario with claude-code, the main ones with opencode
// (5–25 s a session here). Each test checks the MCP calls that arrived,
// the files the session changed, the CLI's exit and its own account of
// the session, and that the usage it reports is exactly what the model
// served.

// wantCalls checks the MCP calls that reached the server for the session.
func (s *session) wantCalls(w *world, want ...mcpCall) {
	s.t.Helper()
	got := w.mcp.callsOf(s.token)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		s.t.Errorf("MCP calls: got %+v, want %+v\n%s", got, want, s.describe())
	}
}

// wantChanges checks the workspace's changes (git status --porcelain).
func (s *session) wantChanges(want ...string) {
	s.t.Helper()
	if got := changes(s.t, s.dir); !slices.Equal(got, want) {
		s.t.Errorf("workspace changes: got %q, want %q", got, want)
	}
}

// wantUsage checks that the usage and cost the CLI reports are exactly
// what the fake model served: claude-code's result line, opencode's summed
// step_finish events (which leave out its title call).
func (s *session) wantUsage(w *world) fakemodel.Usage {
	s.t.Helper()
	served := s.served(w)
	var got fakemodel.Usage
	var gotCost float64
	if s.kind == claude {
		r, ok := s.result()
		if !ok {
			s.t.Fatalf("claude-code printed no result line\n%s", s.describe())
		}
		got, gotCost = r.usage(), r.TotalCostUSD
	} else {
		sum := s.opencode()
		got, gotCost = sum.Usage, sum.Cost
		if sum.Steps != served.Turns {
			s.t.Errorf("opencode: %d step_finish events, the model served %d turns", sum.Steps, served.Turns)
		}
		if served.AuxTurns == 0 {
			s.t.Errorf("opencode made no title call (a request without tools)")
		}
	}
	if got != served.Usage {
		s.t.Errorf("%s reports usage %+v, the model served %+v", s.kind, got, served.Usage)
	}
	if served.Usage.Input == 0 || served.Usage.Output == 0 {
		s.t.Errorf("the model served no tokens: %+v", served.Usage)
	}
	if want := cost(served.Usage); !sameCost(gotCost, want) {
		s.t.Errorf("%s reports cost $%.9f, the list prices make $%.9f of %+v", s.kind, gotCost, want, served.Usage)
	}
	return got
}

// wantSuccess checks the CLI's own account of a session that went well:
// exit 0, and (claude-code) a result line that is no error, completed, with
// no permission denials; (opencode) no error event.
func (s *session) wantSuccess() {
	s.t.Helper()
	if code := s.exitCode(); code != 0 {
		s.t.Errorf("%s exited %d, want 0\n%s", s.kind, code, s.describe())
	}
	if s.kind == claude {
		r, ok := s.result()
		switch {
		case !ok:
			s.t.Errorf("no result line\n%s", s.describe())
		case r.IsError || r.TerminalReason != "completed" || len(r.PermissionDenials) > 0:
			s.t.Errorf("result: is_error %v, terminal_reason %q, permission denials %s\n%s",
				r.IsError, r.TerminalReason, r.PermissionDenials, s.describe())
		}
		return
	}
	if sum := s.opencode(); len(sum.Errors) > 0 {
		s.t.Errorf("opencode error events: %v\n%s", sum.Errors, s.describe())
	}
}

func (s *session) wantNoProblems(w *world) {
	s.t.Helper()
	if p := s.served(w).Problems; len(p) > 0 {
		s.t.Errorf("the fake model could not play its scenario: %q\n%s", p, s.describe())
	}
}

func report(outcome, summary string) mcpCall {
	return mcpCall{Tool: "submit_report", Args: map[string]any{"outcome": outcome, "summary": summary}}
}

func prompt(marker string) string {
	return "You work on ticket ACME-1: Add a health endpoint.\n" + marker + "\nWhen you are done, call submit_report."
}

var both = []cliKind{claude, opencode}

// A session that edits a file and reports done: the file is in the
// workspace, the report reached the MCP server, the usage matches. For
// claude-code three ways to reach the MCP tools: --tools listing the
// built-in tools (MCP tools are then listed directly), the default tools
// (deferred behind ToolSearch, which the model calls first), and the
// default tools with ENABLE_TOOL_SEARCH=false; for opencode both
// providers.
func TestReportDone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		kind       cliKind
		o          opts
		toolSearch bool // the model loads the tool with ToolSearch first
	}{
		{name: "claude-code/tools", kind: claude},
		{name: "claude-code/tool-search", kind: claude, o: opts{toolSearch: true}, toolSearch: true},
		{name: "claude-code/tool-search-off", kind: claude, o: opts{toolSearch: true, env: []string{"ENABLE_TOOL_SEARCH=false"}}},
		{name: "opencode/openai", kind: opencode},
		{name: "opencode/anthropic", kind: opencode, o: opts{provider: "anthropic"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			c.o.prompt = prompt(fakemodel.Marker("report-done", "content=health-check"))
			s := w.start(t, c.kind, c.o)
			s.wait()
			s.wantSuccess()
			s.wantNoProblems(w)
			s.wantCalls(w, report("done", "Wrote the file."))
			s.wantChanges("?? hello.txt")
			if b, err := os.ReadFile(filepath.Join(s.dir, "hello.txt")); err != nil || string(b) != "health-check\n" {
				t.Errorf("hello.txt: %q, %v", b, err)
			}
			s.wantUsage(w)
			served := s.served(w)
			var tools []string
			for _, call := range served.Calls {
				tools = append(tools, call.Tool)
			}
			wantTools := map[cliKind][]string{claude: {"Write", "mcp__ballet__submit_report"}, opencode: {"write", "ballet_submit_report"}}[c.kind]
			if c.toolSearch {
				wantTools = []string{"Write", "ToolSearch", "mcp__ballet__submit_report"}
			}
			if !slices.Equal(tools, wantTools) {
				t.Errorf("the model called %q, want %q", tools, wantTools)
			}
			if api := map[bool]string{true: "anthropic", false: "openai"}[c.kind == claude || c.o.provider == "anthropic"]; served.API != api {
				t.Errorf("the session spoke %q, want %q", served.API, api)
			}
			s.noOrphans()
		})
	}
}

// Reports failed and blocked reach the MCP server as they were made; the
// workspace stays clean.
func TestReportFailedAndBlocked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scenario string
		want     mcpCall
	}{
		{"report-failed", report("failed", "The tests do not pass and I cannot fix them.")},
		{"report-blocked", report("blocked", "The acceptance criteria contradict each other.")},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			s := w.start(t, claude, opts{prompt: prompt(fakemodel.Marker(c.scenario))})
			s.wait()
			s.wantSuccess()
			s.wantNoProblems(w)
			s.wantCalls(w, c.want)
			s.wantChanges()
			s.wantUsage(w)
		})
	}
}

// A blocking question ends the first session without a report; the next
// session of the stage, whose prompt holds the answer, reports done with
// it.
func TestQuestionThenAnswer(t *testing.T) {
	t.Parallel()
	for _, kind := range both {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			marker := fakemodel.Marker("ask", "question=Which_colour?", "answer=teal")
			first := w.start(t, kind, opts{prompt: prompt(marker)})
			first.wait()
			first.wantSuccess()
			first.wantNoProblems(w)
			first.wantCalls(w, mcpCall{Tool: "ask_question", Args: map[string]any{"question": "Which colour?", "blocking": true}})
			first.wantChanges()
			first.wantUsage(w)

			second := w.start(t, kind, opts{prompt: prompt(marker) + "\nAnswered questions:\nQ: Which colour?\nA: teal"})
			second.wait()
			second.wantSuccess()
			second.wantNoProblems(w)
			second.wantCalls(w, report("done", "Done as answered: teal"))
			second.wantChanges()
			second.wantUsage(w)
		})
	}
}

// A session whose MCP server refuses its token runs without Ballet's
// tools and still exits 0: claude-code says so in its first line
// (mcp_servers: status not "connected"), which a runner can act on at
// once; the missing report tells in the end.
func TestMCPRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	s := w.start(t, claude, opts{prompt: prompt(fakemodel.Marker("report-done")), token: "not-a-run-token"})
	s.wait()
	s.wantSuccess()
	s.wantCalls(w)
	s.wantChanges("?? hello.txt")
	init := s.output()[0]
	servers, _ := init["mcp_servers"].([]any)
	t.Logf("mcp_servers: %v", servers)
	if init["subtype"] != "init" || len(servers) != 1 || servers[0].(map[string]any)["status"] == "connected" {
		t.Errorf("first line: subtype %v, mcp_servers %v; want init with ballet not connected", init["subtype"], init["mcp_servers"])
	}
	if p := s.served(w).Problems; len(p) != 1 || !strings.Contains(p[0], "no MCP tool named submit_report") {
		t.Errorf("the model saw %q, want no submit_report tool", p)
	}
}

// get_ticket answers with the run's ticket, which the model passes on.
func TestReadTicket(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tk := ticket{Key: "ACME-7", Title: "Fix the login", Description: "It fails.", AcceptanceCriteria: "It works."}
	s := w.start(t, claude, opts{prompt: prompt(fakemodel.Marker("read-ticket")), ticket: tk})
	s.wait()
	s.wantSuccess()
	s.wantNoProblems(w)
	s.wantCalls(w, mcpCall{Tool: "get_ticket", Args: map[string]any{}},
		report("done", `{"key":"ACME-7","title":"Fix the login","description":"It fails.","acceptance_criteria":"It works."}`))
	s.wantChanges()
	s.wantUsage(w)
}

// A session that ends without submit_report exits 0 like a good one: only
// the missing report tells (the Runner then fails it, "no report").
func TestNoReport(t *testing.T) {
	t.Parallel()
	for _, kind := range both {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			s := w.start(t, kind, opts{prompt: prompt(fakemodel.Marker("no-report"))})
			s.wait()
			s.wantSuccess()
			s.wantNoProblems(w)
			s.wantCalls(w)
			s.wantChanges("?? hello.txt")
			s.wantUsage(w)
		})
	}
}

// A model API error ends the session as failed with the error's message:
// claude-code exits 1 with is_error and terminal_reason api_error after
// CLAUDE_CODE_MAX_RETRIES (1) retries; opencode exits 1 with an error
// event after its own retries, which the retry-after-ms header keeps
// short.
func TestAPIError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		kind   cliKind
		marker string
	}{
		{"claude-code/status", claude, fakemodel.Marker("api-error")},
		{"claude-code/overloaded", claude, fakemodel.Marker("api-error", "status=529", "type=overloaded_error")},
		{"claude-code/in-stream", claude, fakemodel.Marker("api-error", "in=stream")},
		{"opencode/status", opencode, fakemodel.Marker("api-error")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			s := w.start(t, c.kind, opts{prompt: prompt(c.marker)})
			s.wait()
			if code := s.exitCode(); code != 1 {
				t.Errorf("exit %d, want 1\n%s", code, s.describe())
			}
			s.wantCalls(w)
			s.wantChanges()
			served := s.served(w)
			if served.Errors < 2 || served.Turns != 0 {
				t.Errorf("the model served %d errors (want the first and at least one retry) and %d turns", served.Errors, served.Turns)
			}
			if c.kind == claude {
				r, ok := s.result()
				if !ok || !r.IsError || r.TerminalReason != "api_error" || !strings.Contains(r.Result, "API Error") {
					t.Errorf("result: %+v (ok %v), want is_error with terminal_reason api_error\n%s", r, ok, s.describe())
				}
				if r.usage() != (fakemodel.Usage{}) || r.TotalCostUSD != 0 {
					t.Errorf("usage %+v, cost %v after errors only", r.usage(), r.TotalCostUSD)
				}
				return
			}
			sum := s.opencode()
			if len(sum.Errors) != 1 || !strings.Contains(sum.Errors[0], "fake model: scripted api_error") {
				t.Errorf("opencode error events: %q, want one naming the model's error\n%s", sum.Errors, s.describe())
			}
		})
	}
}

// A model that never answers (or stalls mid-stream) leaves the CLI silent
// and waiting on its request (claude-code's own timeout is 10 minutes):
// the runner's watchdog must end it. Here SIGTERM to its process group
// does, with no result line, no change and nothing left running.
func TestHangNeedsAWatchdog(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		kind   cliKind
		marker string
	}{
		{"claude-code/at-start", claude, fakemodel.Marker("hang")},
		{"claude-code/mid-stream", claude, fakemodel.Marker("hang", "at=mid")},
		{"opencode/mid-stream", opencode, fakemodel.Marker("hang", "at=mid")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			s := w.start(t, c.kind, opts{prompt: prompt(c.marker)})
			if _, err := w.fm.Wait(hang.Context(t), func(all []fakemodel.Session) bool {
				return len(all) > 0 && all[len(all)-1].Hangs > 0
			}); err != nil {
				t.Fatalf("the CLI never made its request: %v\n%s", err, s.describe())
			}
			if s.exited() {
				t.Fatalf("the CLI exited while its request hung\n%s", s.describe())
			}
			s.signal(syscall.SIGTERM)
			s.wait()
			s.wantStoppedBy(syscall.SIGTERM)
			s.wantCalls(w)
			s.wantChanges()
			s.noOrphans()
		})
	}
}

// wantStoppedBy checks how a session stopped by sig ended: claude-code
// exits 128+sig (143 for SIGTERM) without a result line; opencode dies of
// the signal; SIGKILL kills both.
func (s *session) wantStoppedBy(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	ws := s.state.Sys().(syscall.WaitStatus)
	s.mu.Unlock()
	switch {
	case ws.Signaled() && ws.Signal() == sig:
	case ws.Exited() && ws.ExitStatus() == 128+int(sig):
	default:
		s.t.Errorf("%s stopped by %v: %v, want exit %d or death by the signal\n%s", s.kind, sig, s.state, 128+int(sig), s.describe())
	}
	if _, ok := s.result(); ok {
		s.t.Errorf("a result line after %v\n%s", sig, s.describe())
	}
}

// A line of 20 MB (the model's answer) comes through whole, and the
// session ends as usual.
func TestHugeLine(t *testing.T) {
	t.Parallel()
	const size = 20_000_000
	w := newWorld(t)
	s := w.start(t, claude, opts{prompt: prompt(fakemodel.Marker("huge-line", "size=20000000"))})
	s.wait()
	s.wantSuccess()
	s.wantNoProblems(w)
	s.wantCalls(w, report("done", "Reported before a huge answer."))
	s.wantChanges()
	s.wantUsage(w)
	if s.maxLine < size {
		t.Errorf("the longest line is %d bytes, want at least %d", s.maxLine, size)
	}
	if r, _ := s.result(); len(r.Result) != size {
		t.Errorf("the result holds %d bytes of text, want %d", len(r.Result), size)
	}
}

// Slow work: each step a shell call that sleeps and appends to work.txt;
// three quick ones run to the report.
func TestSlowWork(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	s := w.start(t, claude, opts{prompt: prompt(fakemodel.Marker("slow-work", "steps=3", "sleep=0"))})
	s.wait()
	s.wantSuccess()
	s.wantNoProblems(w)
	s.wantCalls(w, report("done", "Did 3 steps of work."))
	s.wantChanges("?? work.txt")
	if b, _ := os.ReadFile(filepath.Join(s.dir, "work.txt")); string(b) != "step 1\nstep 2\nstep 3\n" {
		t.Errorf("work.txt: %q", b)
	}
	s.wantUsage(w)
}

// A session stopped mid-work (cancelled, or its runner killed). Both
// CLIs run each shell command in a session (and process group) of its
// own, so a signal to the CLI's process group does not reach the command:
//   - SIGTERM: claude-code kills its commands itself and exits 143;
//     opencode usually dies of it but was seen to go on working after a
//     SIGTERM that came while a command ran, so SIGKILL must follow;
//   - SIGKILL to the CLI's group alone leaves the running command behind;
//   - SIGKILL to the group of the CLI and of every descendant (killTree;
//     or a sandbox's PID namespace) leaves nothing.
//
// The work done so far stays in the workspace; no report was made.
func TestStopMidWork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		kind   cliKind
		stop   func(s *session)
		sig    syscall.Signal
		orphan bool // the command outlives the CLI
	}{
		{"claude-code/SIGTERM", claude, func(s *session) { s.signal(syscall.SIGTERM) }, syscall.SIGTERM, false},
		{"claude-code/SIGKILL-group", claude, func(s *session) { s.signal(syscall.SIGKILL) }, syscall.SIGKILL, true},
		{"claude-code/SIGKILL-tree", claude, func(s *session) { killTree(s.cmd.Process.Pid, syscall.SIGKILL) }, syscall.SIGKILL, false},
		{"opencode/SIGKILL-tree", opencode, func(s *session) { killTree(s.cmd.Process.Pid, syscall.SIGKILL) }, syscall.SIGKILL, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			// Each step writes, then sleeps 10 minutes: a command that
			// survives the stop is still there when it is checked.
			s := w.start(t, c.kind, opts{prompt: prompt(fakemodel.Marker("slow-work", "steps=3", "sleep=600"))})
			for _, p := range s.midWork(w) {
				if p.pid != s.cmd.Process.Pid && p.ppid == s.cmd.Process.Pid && p.sid != p.pid {
					t.Errorf("%d (%s), started by the CLI, does not lead a session of its own: %+v", p.pid, p.cmd, p)
				}
			}
			c.stop(s)
			s.wait()
			s.wantStoppedBy(c.sig)
			s.wantCalls(w)
			s.wantWorkDone(1, 1)
			if !c.orphan {
				s.noOrphans()
				return
			}
			left := sessionProcs(s.mark)
			if !slices.ContainsFunc(left, func(p proc) bool { return p.cmd == "sleep" }) {
				t.Errorf("after SIGKILL to the CLI's process group its command is gone (%+v): a group kill would do", left)
			}
		})
	}
}

// midWork waits until the model has asked for the first shell call and
// its sleep runs; it returns the session's processes then.
func (s *session) midWork(w *world) []proc {
	s.t.Helper()
	if _, err := w.fm.Wait(hang.Context(s.t), func(all []fakemodel.Session) bool {
		return len(all) > 0 && len(all[len(all)-1].Calls) >= 1
	}); err != nil {
		s.t.Fatalf("the session did not get to its first step: %v\n%s", err, s.describe())
	}
	var running []proc
	hang.WaitFor(s.t, "a shell command of the session to run", func() bool {
		running = sessionProcs(s.mark)
		for _, p := range running {
			if p.cmd == "sleep" {
				return true
			}
		}
		return false
	})
	return running
}

// wantWorkDone checks that work.txt holds between min and max steps.
func (s *session) wantWorkDone(least, most int) {
	s.t.Helper()
	b, _ := os.ReadFile(filepath.Join(s.dir, "work.txt"))
	if n := strings.Count(string(b), "\n"); n < least || n > most {
		s.t.Errorf("work.txt after the stop: %q, want %d to %d steps done", b, least, most)
	}
}

// A skill reaches the session the way each CLI expects it (claude-code: a
// folder under $CLAUDE_CONFIG_DIR/skills; opencode: under
// $XDG_CONFIG_HOME/opencode/skill) and the model loads it with the CLI's
// skill tool.
func TestSkill(t *testing.T) {
	t.Parallel()
	const body = "---\nname: house-style\ndescription: How code is written here\n---\nHOUSE-STYLE-BODY: tabs, not spaces.\n"
	for _, kind := range both {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			s := w.start(t, kind, opts{prompt: prompt(fakemodel.Marker("use-skill", "name=house-style")),
				skills: map[string]string{"house-style": body}})
			s.wait()
			s.wantSuccess()
			s.wantNoProblems(w)
			calls := w.mcp.callsOf(s.token)
			if len(calls) != 1 || calls[0].Tool != "submit_report" ||
				!strings.Contains(calls[0].Args["summary"].(string), "HOUSE-STYLE-BODY: tabs, not spaces.") {
				t.Errorf("MCP calls %+v, want one report quoting the skill\n%s", calls, s.describe())
			}
			s.wantChanges()
			s.wantUsage(w)
		})
	}
}
