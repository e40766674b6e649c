//go:build linux

package runner_test

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runproto"
)

// The runner against the fake Core, the real CLIs (against the fake
// model), real git remotes and the real bubblewrap: every scenario with
// claude-code, the main ones with opencode (5–25 s a session here).

var bothCLIs = []string{runproto.ClaudeCode, runproto.OpenCode}

// A session edits a file and reports done: the branch ballet/ACME-1 is
// pushed with the change (one commit by the Ballet agent on main), the run
// finishes succeeded with exactly the usage the model served, its output
// reached Core's log, no checkpoint is left and nothing of the session
// runs on.
func TestReportDone(t *testing.T) {
	t.Parallel()
	for _, cli := range bothCLIs {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options(cli))
			ss := w.session(fakemodel.Marker("report-done", "content=health-check"))
			ss.Stage.Adapter = cli
			run := w.core.enqueue(ss)
			got := w.core.over(run)
			f := got.Finishes[0]
			if got.Status != runproto.StatusSucceeded || f.ExitStatus != 0 || f.Error != "" || got.Outcome != "done" {
				t.Fatalf("run %s, outcome %q, finish %+v", got.Status, got.Outcome, f)
			}
			served := w.served()
			if len(served) != 1 {
				t.Fatalf("the model served %d sessions", len(served))
			}
			wantUsage(t, f.Usage, served[0])
			head := w.remote.ref("refs/heads/ballet/ACME-1")
			if head == "" {
				t.Fatal("the branch was not pushed")
			}
			if got := w.remote.show(head, "hello.txt"); got != "health-check\n" {
				t.Errorf("hello.txt on the branch: %q", got)
			}
			if files := w.remote.files(head); !slices.Equal(files, []string{"README", "hello.txt"}) {
				t.Errorf("the branch holds %q", files)
			}
			if a := w.remote.author(head); a != "Ballet agent <agent@ballet.invalid> / Ballet agent" {
				t.Errorf("the commit is by %q", a)
			}
			if parent := w.remote.ref("refs/heads/main"); git(t, w.remote.work, "--git-dir="+w.remote.url, "rev-parse", head+"^") != parent {
				t.Errorf("the commit is not on main")
			}
			if c := w.remote.ref("refs/ballet/checkpoints/ACME-1/implement"); c != "" {
				t.Errorf("the checkpoint %s is left after the stage ended with an outcome", c)
			}
			if !strings.Contains(string(got.Log), `"submit_report"`) && !strings.Contains(string(got.Log), "submit_report") {
				t.Errorf("Core's log of the run lacks the session's output: %.2000s", got.Log)
			}
			if pids := sessionProcs(run.ID); len(pids) > 0 {
				t.Errorf("processes of the session run on: %v", pids)
			}
		})
	}
}

// Reports failed and blocked end the stage with that outcome: nothing
// changed, so nothing is pushed, and no checkpoint is left.
func TestReportFailedAndBlocked(t *testing.T) {
	t.Parallel()
	for _, outcome := range []string{"failed", "blocked"} {
		t.Run(outcome, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options())
			run := w.core.enqueue(w.session(fakemodel.Marker("report-" + outcome)))
			got := w.core.over(run)
			if f := got.Finishes[0]; got.Outcome != outcome || got.Status != runproto.StatusSucceeded || f.ExitStatus != 0 || f.Error != "" {
				t.Fatalf("run %s, outcome %q, finish %+v", got.Status, got.Outcome, f)
			}
			wantUsage(t, got.Finishes[0].Usage, w.served()[0])
			for _, ref := range []string{"refs/heads/ballet/ACME-1", "refs/ballet/checkpoints/ACME-1/implement"} {
				if c := w.remote.ref(ref); c != "" {
					t.Errorf("%s was pushed: %s", ref, c)
				}
			}
		})
	}
}

// A blocking question ends the first session without a report (Core then
// waits for the answer); the next session of the same stage gets the
// answer in its prompt and reports done with it.
func TestQuestionThenAnswer(t *testing.T) {
	t.Parallel()
	for _, cli := range bothCLIs {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options(cli))
			ss := w.session(fakemodel.Marker("ask", "question=Which_colour?", "answer=teal"))
			ss.Stage.Adapter = cli
			first := w.core.finished(w.core.enqueue(ss))
			if !first.Blocking || len(first.Questions) != 1 || first.Questions[0].Question != "Which colour?" || first.Outcome != "" {
				t.Fatalf("first session: blocking %v, questions %+v, outcome %q", first.Blocking, first.Questions, first.Outcome)
			}
			if e := first.Finishes[0].Error; !strings.Contains(e, "without submit_report") {
				t.Errorf("first finish error %q", e)
			}
			ss.AnsweredQuestions = []runproto.SessionAnswer{{Question: "Which colour?", Answer: "teal"}}
			second := w.core.finished(w.core.enqueue(ss))
			if second.Status != runproto.StatusSucceeded || second.Outcome != "done" || second.Summary != "Done as answered: teal" {
				t.Fatalf("second session: %s %q %q %+v", second.Status, second.Outcome, second.Summary, second.Finishes)
			}
		})
	}
}

// A session that ends without submit_report has failed, whatever its
// exit status: the finish says so, the branch is not pushed, and its work
// waits in the stage's checkpoint.
func TestNoReport(t *testing.T) {
	t.Parallel()
	for _, cli := range bothCLIs {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options(cli))
			ss := w.session(fakemodel.Marker("no-report"))
			ss.Stage.Adapter = cli
			got := w.core.over(w.core.enqueue(ss))
			f := got.Finishes[0]
			if got.Status != runproto.StatusFailed || f.ExitStatus != 0 || !strings.Contains(f.Error, "the session ended without submit_report") {
				t.Fatalf("run %s, finish %+v", got.Status, f)
			}
			wantUsage(t, f.Usage, w.servedFirst())
			if c := w.remote.ref("refs/heads/ballet/ACME-1"); c != "" {
				t.Errorf("the branch was pushed: %s", c)
			}
			c := w.remote.ref("refs/ballet/checkpoints/ACME-1/implement")
			if c == "" || w.remote.show(c, "hello.txt") != "hello from the fake model\n" {
				t.Errorf("the checkpoint %q does not keep the session's work", c)
			}
		})
	}
}

// A model API error (not a provider's limit) fails the session with the
// CLI's own message.
func TestAPIError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cli  string
		want []string
	}{
		{runproto.ClaudeCode, []string{"claude-code: API Error", "terminal_reason api_error"}},
		{runproto.OpenCode, []string{"opencode: APIError", "fake model: scripted api_error"}},
	} {
		t.Run(c.cli, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options(c.cli))
			ss := w.session(fakemodel.Marker("api-error", "status=500", "type=api_error"))
			ss.Stage.Adapter = c.cli
			got := w.core.finished(w.core.enqueue(ss))
			f := got.Finishes[0]
			if got.Status != runproto.StatusFailed || f.ExitStatus != 1 {
				t.Fatalf("run %s, finish %+v", got.Status, f)
			}
			for _, want := range c.want {
				if !strings.Contains(f.Error, want) {
					t.Errorf("finish error %q lacks %q", f.Error, want)
				}
			}
		})
	}
}

// A provider's limit is not the agent's failure: the real CLI, refused by
// the fake model's rate-limit scenario past its (capped) retries, ends the
// session interrupted provider_limit, with retry_at when the provider said
// when: retry-after taken from the end of the session, or the Anthropic
// reset header as given (claude-code prints neither: the runner's meter
// kept the refusal's headers); none when it did not say.
func TestProviderLimit(t *testing.T) {
	t.Parallel()
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, c := range []struct {
		name, cli string
		params    []string
		exact     *time.Time    // retry_at is this
		after     time.Duration // else, when > 0, retry_at is this long after the session's end (to the second)
		want      string        // the finish's error holds it
	}{
		{"claude-code retry-after", runproto.ClaudeCode, []string{"retry_after=1"}, nil, time.Second, "API Error: Request rejected (429)"},
		{"claude-code reset", runproto.ClaudeCode, []string{"reset=3600"}, ptr(t0.Add(time.Hour)), 0, "API Error: Request rejected (429)"},
		{"claude-code overloaded", runproto.ClaudeCode, []string{"kind=overloaded"}, nil, 0, "API Error: 529 Overloaded"},
		{"opencode retry-after", runproto.OpenCode, []string{"retry_after=1"}, nil, time.Second, "opencode: APIError: Rate limit reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.fm.Now = func() time.Time { return t0 }
			w.start(w.options(c.cli))
			ss := w.session(fakemodel.Marker("rate-limit", c.params...))
			ss.Stage.Adapter = c.cli
			before := time.Now()
			got := w.core.finished(w.core.enqueue(ss))
			end := time.Now()
			f := got.Finishes[0]
			if got.Status != runproto.StatusInterrupted || f.Interrupted != runproto.ReasonProviderLimit || !strings.Contains(f.Error, c.want) {
				t.Fatalf("run %s, finish %+v", got.Status, f)
			}
			switch {
			case c.exact != nil:
				if f.RetryAt == nil || !f.RetryAt.Equal(*c.exact) {
					t.Errorf("retry_at %v, want %v", f.RetryAt, c.exact)
				}
			case c.after > 0:
				if f.RetryAt == nil || f.RetryAt.Before(before.Add(c.after).Truncate(time.Second)) || f.RetryAt.After(end.Add(c.after+time.Second)) {
					t.Errorf("retry_at %v, want %v after the session's end (between %v and %v)", f.RetryAt, c.after, before, end)
				}
			default:
				if f.RetryAt != nil {
					t.Errorf("retry_at %v, want none", f.RetryAt)
				}
			}
			if s := w.servedFirst(); s.Errors < 2 || s.Turns != 0 {
				t.Errorf("the model served %+v: want only refusals, the CLI's try and a retry", s)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// An agent that succeeded is never limited: the provider refusing the
// session's closing turn, after its report went through, leaves the run
// succeeded (exit 0, no interruption) with its work pushed.
func TestProviderLimitAfterReport(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.start(w.options())
	ss := w.session(fakemodel.Marker("rate-limit", "from=2", "retry_after=1"))
	got := w.core.over(w.core.enqueue(ss))
	f := got.Finishes[0]
	if got.Status != runproto.StatusSucceeded || got.Outcome != "done" || f.ExitStatus != 0 || f.Interrupted != "" || f.RetryAt != nil || f.Error != "" {
		t.Fatalf("run %s, outcome %q, finish %+v", got.Status, got.Outcome, f)
	}
	if s := w.servedFirst(); s.Errors == 0 {
		t.Fatalf("the model refused nothing: %+v", s)
	}
	if head := w.remote.ref("refs/heads/ballet/ACME-1"); head == "" || w.remote.show(head, "hello.txt") != "hello from the fake model\n" {
		t.Errorf("the branch %q lacks the agent's work", head)
	}
}

// When the CLI cannot reach Core's MCP endpoint it would work without
// Ballet's tools, to no end: claude-code says so in its first line, and
// the runner stops the session at once, failing it with the reason.
func TestMCPUnreachable(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.start(w.options())
	ss := w.session(fakemodel.Marker("slow-work", "steps=3", "sleep=600"))
	ss.MCP.URL = w.core.URL + "/not-mcp"
	run := w.core.enqueue(ss)
	got := w.core.over(run)
	f := got.Finishes[0]
	if got.Status != runproto.StatusFailed || !strings.Contains(f.Error, "could not connect to Core's MCP endpoint (ballet: failed)") {
		t.Fatalf("run %s, finish %+v", got.Status, f)
	}
	if _, err := os.Stat(filepath.Join(w.root, "runner", "runs", run.ID)); err == nil {
		t.Error("the run's folder is left")
	}
}

// A model that never answers leaves the CLI silent: the watchdog stops the
// session, which fails saying so, and nothing of it runs on.
func TestHangStoppedByTheWatchdog(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	o := w.options()
	// Long enough for the CLI to reach the model first even on a loaded
	// machine (its start-up prints nothing: 3 s was seen to pass before the
	// first request with 8 sessions starting at once), so the watchdog
	// stops the hang, not a slow start.
	o.Config.Watchdog.Duration = 15 * time.Second
	w.start(o)
	run := w.core.enqueue(w.session(fakemodel.Marker("hang", "at=mid")))
	got := w.core.over(run)
	f := got.Finishes[0]
	if got.Status != runproto.StatusFailed || f.ExitStatus == 0 || !strings.Contains(f.Error, "stopped by the watchdog: no output for 15s") {
		t.Fatalf("run %s, finish %+v", got.Status, f)
	}
	if served := w.served(); len(served) != 1 || served[0].Hangs == 0 {
		t.Errorf("the model did not hang the session: %+v", served)
	}
	if pids := sessionProcs(run.ID); len(pids) > 0 {
		t.Errorf("processes of the session run on: %v", pids)
	}
}

// midWork waits until the session's first shell step (slow-work) has
// written work.txt into the workspace and sleeps.
func (w *world) midWork(run *fcRun) {
	w.t.Helper()
	w.core.wait("the session to start", func() bool { return run.Runner != "" })
	file := filepath.Join(w.root, "runner", "runs", run.ID, "work", "work.txt")
	waitFor(w.t, "the first step of work", func() bool {
		b, _ := os.ReadFile(file)
		return string(b) == "step 1\n"
	})
}

// A cancellation (the ticket paused) stops the session mid-work at once:
// the run finishes cancelled with the usage the model served so far, the work done is kept
// in the stage's checkpoint, nothing is pushed to the branch, and nothing
// of the session runs on.
func TestCancelMidRun(t *testing.T) {
	t.Parallel()
	for _, cli := range bothCLIs {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options(cli))
			ss := w.session(fakemodel.Marker("slow-work", "steps=3", "sleep=600"))
			ss.Stage.Adapter = cli
			run := w.core.enqueue(ss)
			w.midWork(run)
			w.core.cancel(run)
			got := w.core.over(run)
			f := got.Finishes[0]
			if got.Status != runproto.StatusCancelled || f.ExitStatus == 0 || !strings.Contains(f.Error, "cancelled") {
				t.Fatalf("run %s, finish %+v", got.Status, f)
			}
			// Stopped in its first shell call, the session told no total
			// (claude-code) or nothing at all (opencode tells a step's
			// tokens after its tool calls): the usage is still every token
			// the model served, its cost their list prices (issue 23).
			wantUsage(t, f.Usage, w.servedFirst())
			c := w.remote.ref("refs/ballet/checkpoints/ACME-1/implement")
			if c == "" || w.remote.show(c, "work.txt") != "step 1\n" {
				t.Errorf("the checkpoint %q does not keep the work done", c)
			}
			if c := w.remote.ref("refs/heads/ballet/ACME-1"); c != "" {
				t.Errorf("the branch was pushed: %s", c)
			}
			if pids := sessionProcs(run.ID); len(pids) > 0 {
				t.Errorf("processes of the session run on: %v", pids)
			}
		})
	}
}

// A session cancelled while the model has served nothing yet (its first
// request hangs) costs nothing: its usage is reported, all zeros. (opencode
// and its meter: TestOpenCodeUsageIsWhatTheModelServed in agent and the
// meter's tests.)
func TestCancelBeforeTheModelServed(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{runproto.ClaudeCode} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.start(w.options(cli))
			ss := w.session(fakemodel.Marker("hang"))
			ss.Stage.Adapter = cli
			run := w.core.enqueue(ss)
			waitFor(t, "the model's first request", func() bool {
				served := w.served()
				return len(served) > 0 && served[0].Hangs > 0
			})
			w.core.cancel(run)
			got := w.core.over(run)
			f := got.Finishes[0]
			if got.Status != runproto.StatusCancelled || f.Usage == nil || *f.Usage != (runproto.Usage{}) {
				t.Fatalf("run %s, usage %+v", got.Status, f.Usage)
			}
			if served := w.servedFirst(); served.Usage != (fakemodel.Usage{}) {
				t.Fatalf("the model served %+v", served.Usage)
			}
		})
	}
}

// A line of 20 MB (the model's answer) comes through: the session
// succeeds, and Core keeps its log up to the limit, marked truncated.
func TestHugeLine(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.core.logLimit = 1 << 20
	w.start(w.options())
	got := w.core.finished(w.core.enqueue(w.session(fakemodel.Marker("huge-line", "size=20000000"))))
	if f := got.Finishes[0]; got.Status != runproto.StatusSucceeded || f.ExitStatus != 0 || f.Error != "" {
		t.Fatalf("run %s, finish %+v", got.Status, f)
	}
	if !got.Truncated || len(got.Log) != 1<<20 {
		t.Errorf("Core's log: %d bytes, truncated %v; want 1 MiB, truncated", len(got.Log), got.Truncated)
	}
	wantUsage(t, got.Finishes[0].Usage, w.served()[0])
}

// The runner is SIGKILLed mid-work, after a checkpoint. Under bwrap
// nothing of its session outlives it; without a sandbox the CLI's shell
// command does (it runs in a session of its own), and the next runner's
// start sweeps it. Core gives the silent run up; the next session of the
// same stage starts from the checkpoint, is told so in its prompt, and
// publishes the earlier work with its own.
func TestRunnerKilledMidWork(t *testing.T) {
	t.Parallel()
	for _, sb := range []string{"bwrap", "none"} {
		t.Run(sb, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			o := w.options()
			o.Config.Sandbox = sb
			o.Config.Checkpoint.Duration = 500 * time.Millisecond
			child := w.startChild(o)
			run := w.core.enqueue(w.session(fakemodel.Marker("slow-work", "steps=3", "sleep=600")))
			w.midWork(run)
			waitFor(t, "a checkpoint of the first step", func() bool {
				c := w.remote.ref("refs/ballet/checkpoints/ACME-1/implement")
				return c != "" && w.remote.show(c, "work.txt") == "step 1\n"
			})
			// The heartbeats have told Core the usage of the first step,
			// every token the model served (its output tokens too): a
			// runner killed now leaves its run's spend counted.
			w.core.wait("the session's usage so far", func() bool {
				u := run.Usage
				served := w.served()
				return len(served) == 1 && served[0].Usage.Output > 0 && served[0].Usage ==
					fakemodel.Usage{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens}
			})
			if want := listCost(w.servedFirst().Usage); !sameCost(run.Usage.CostUSD, want) {
				t.Errorf("the usage so far costs $%.9f, the list prices make $%.9f", run.Usage.CostUSD, want)
			}
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			if sb == "bwrap" {
				waitFor(t, "the session's processes to die with the runner", func() bool { return len(sessionProcs(run.ID)) == 0 })
			} else {
				// The CLI died with the runner (Pdeathsig); its command did
				// not. Give it the time to have been killed too, had it been
				// in reach: the CLI is gone.
				waitFor(t, "the CLI to die with the runner", func() bool {
					return !slices.ContainsFunc(sessionProcs(run.ID), func(p string) bool { return strings.Contains(p, "(claude") })
				})
				left := sessionProcs(run.ID)
				if !slices.ContainsFunc(left, func(p string) bool { return strings.HasSuffix(p, "(sleep)") }) {
					t.Fatalf("the session's command did not outlive the runner (%q): the sweep below proves nothing", left)
				}
			}
			w.core.giveUp(run)
			// A lease call the killed runner left open must not take the
			// next run (Core would fail it after the grace; the fake
			// Core would lose it).
			w.core.pollsOver(0)

			second := w.core.enqueue(w.session(fakemodel.Marker("report-done")))
			w.start(o)
			w.core.wait("the second runner to register", func() bool { return len(w.core.runners) == 2 })
			if pids := sessionProcs(run.ID); len(pids) > 0 {
				t.Errorf("after the next runner's start, processes of the killed session run on: %v", pids)
			}
			got := w.core.over(second)
			if got.Status != runproto.StatusSucceeded {
				t.Fatalf("second session: %s %+v", got.Status, got.Finishes)
			}
			if !strings.Contains(w.prompts(), "You are continuing from a checkpoint") {
				t.Error("the second session's prompt does not say it continues from a checkpoint")
			}
			head := w.remote.ref("refs/heads/ballet/ACME-1")
			if files := w.remote.files(head); !slices.Equal(files, []string{"README", "hello.txt", "work.txt"}) || w.remote.show(head, "work.txt") != "step 1\n" {
				t.Errorf("the branch holds %q (work.txt %q): want the checkpoint's work and the new", files, w.remote.show(head, "work.txt"))
			}
			if c := w.remote.ref("refs/ballet/checkpoints/ACME-1/implement"); c != "" {
				t.Errorf("the checkpoint %s is left after the stage ended with an outcome", c)
			}
		})
	}
}

// SIGTERM drains: no new leases; a session that ends within [runner]
// drain finishes as usual, one that does not is stopped and finished as
// interrupted (runner_drain), saying why; then the runner exits cleanly.
func TestDrain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		marker  string
		drain   time.Duration
		status  string
		errWant string
	}{
		{"finishes in time", fakemodel.Marker("slow-work", "steps=1", "sleep=2"), time.Minute, runproto.StatusSucceeded, ""},
		{"runs out", fakemodel.Marker("slow-work", "steps=3", "sleep=600"), time.Second, runproto.StatusInterrupted,
			"the runner was stopped and its drain time (1s) ran out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			o := w.options()
			o.Config.Sessions = 1
			o.Config.Drain.Duration = c.drain
			rr := w.start(o)
			run := w.core.enqueue(w.session(c.marker))
			w.midWork(run)
			next := w.core.enqueue(w.session(fakemodel.Marker("report-done")))
			if err := rr.stop(t); err != nil {
				t.Fatalf("the drained runner returned %v", err)
			}
			got := w.core.snapshot(run)
			if len(got.Finishes) != 1 || got.Status != c.status || (c.errWant == "") != (got.Finishes[0].Error == "") ||
				!strings.Contains(got.Finishes[0].Error, c.errWant) {
				t.Fatalf("run %s, finishes %+v; want %s with error %q", got.Status, got.Finishes, c.status, c.errWant)
			}
			if want := map[bool]string{true: runproto.ReasonRunnerDrain}[c.status == runproto.StatusInterrupted]; got.Finishes[0].Interrupted != want {
				t.Errorf("the finish says interrupted %q, want %q", got.Finishes[0].Interrupted, want)
			}
			if n := w.core.snapshot(next); n.Runner != "" {
				t.Error("the draining runner leased another run")
			}
			draining := false
			for _, hb := range w.core.registered()[0].Heartbeats {
				draining = draining || (hb.Draining && slices.Contains(hb.Sessions, run.ID))
			}
			if !draining {
				t.Error("no heartbeat said the runner was draining its session")
			}
			if pids := sessionProcs(run.ID); len(pids) > 0 {
				t.Errorf("processes of the session run on: %v", pids)
			}
			// The checkpoint goes with a success only: a session the
			// drain stopped keeps its work in it.
			ck := w.remote.ref("refs/ballet/checkpoints/ACME-1/implement")
			switch {
			case c.status == runproto.StatusSucceeded && ck != "":
				t.Errorf("the checkpoint %s is left after the stage ended with an outcome", ck)
			case c.status != runproto.StatusSucceeded && (ck == "" || w.remote.show(ck, "work.txt") != "step 1\n"):
				t.Errorf("the checkpoint %q does not keep the work of the session the drain stopped", ck)
			}
		})
	}
}

// The sandbox: an agent (the real CLI running a script of the
// repository) cannot read the runner's config (with its token), Core's
// data, another run's workspace or the runner user's files, cannot write
// outside its workspace, and has none of the runner's environment but
// what sessions get.
func TestSandboxConfinesTheAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	o := w.options()
	configFile := filepath.Join(w.root, "etc", "ballet.toml")
	writeFile(t, configFile, "[runner]\ntoken = \""+w.core.runnerToken+"\"\n")
	coreData := filepath.Join(w.root, "core-data")
	writeFile(t, filepath.Join(coreData, "core.db"), "every organization's data")
	other := filepath.Join(o.Config.Workdir, "runs", "other-run", "work", "secret.go")
	writeFile(t, other, "another run's code")
	o.Hide = []string{configFile, coreData}
	script := `probe() { if sh -c "$2" >/dev/null 2>&1; then echo "$1: ok"; else echo "$1: refused"; fi; }
probe read-config "cat '` + configFile + `'"
probe read-core-data "cat '` + coreData + `/core.db'"
probe read-other-run "cat '` + other + `'"
probe write-system "echo x > /usr/ballet-probe"
probe write-outside "echo x > '` + w.root + `/outside'"
probe write-workspace "echo x > inside.txt"
echo "runs: $(ls '` + o.Config.Workdir + `/runs' 2>&1 | tr '\n' ' ')"
echo "env: $(env | grep -e RUNNER_SECRET -e inherited -e BALLET_RUNNER -e '^GIT_CONFIG' -e '^GIT_ASKPASS' | tr '\n' ' ')."
`
	writeFile(t, filepath.Join(w.remote.work, "probe.sh"), script)
	git(t, w.remote.work, "add", "-A")
	git(t, w.remote.work, "commit", "--quiet", "-m", "probe")
	git(t, w.remote.work, "push", "--quiet", w.remote.url, "HEAD:refs/heads/main")
	w.start(o)
	run := w.core.enqueue(w.session(fakemodel.Marker("run-script", "file=probe.sh")))
	got := w.core.finished(run)
	if got.Status != runproto.StatusSucceeded {
		t.Fatalf("run %s %+v", got.Status, got.Finishes)
	}
	for _, want := range []string{"read-config: refused", "read-core-data: refused", "read-other-run: refused",
		"write-system: refused", "write-outside: refused", "write-workspace: ok", "runs: " + run.ID + " \n", "env: ."} {
		if !strings.Contains(got.Summary+"\n", want) {
			t.Errorf("the agent's probes say %q; want %q", got.Summary, want)
		}
	}
	if _, err := os.Stat(filepath.Join(w.root, "outside")); err == nil {
		t.Error("the agent wrote outside its workspace")
	}
}

// Secrets stay with the runner: the repository credential (an http
// remote that requires it), the run token, the runner token and the model
// key appear in no log line of the runner, in nothing it sent Core, and
// the session's output holds no credential.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const user, secret = "ballet", "tok-0123456789abcdef-repo-secret"
	url := httpRemote(t, w.remote, user, secret)
	w.start(w.options())
	ss := w.session(fakemodel.Marker("report-done"))
	ss.Repository.URL = url
	ss.Credential = &runproto.Credential{Username: user, Secret: secret}
	run := w.core.enqueue(ss)
	got := w.core.over(run)
	if got.Status != runproto.StatusSucceeded || w.remote.ref("refs/heads/ballet/ACME-1") == "" {
		t.Fatalf("run %s %+v; the branch %q", got.Status, got.Finishes, w.remote.ref("refs/heads/ballet/ACME-1"))
	}
	logs := w.logs.String()
	if !strings.Contains(logs, "git push") {
		t.Fatalf("the runner's debug log shows no git command: the check below proves nothing\n%s", tail(logs, 3000))
	}
	var sent strings.Builder
	for _, r := range w.core.allRequests() {
		sent.WriteString(r.Body)
	}
	for name, s := range map[string]string{"repository credential": secret, "run token": run.Token,
		"runner token": w.core.runnerToken, "model key": modelKey} {
		if strings.Contains(logs, s) {
			t.Errorf("the runner's log holds the %s", name)
		}
		if strings.Contains(sent.String(), s) {
			t.Errorf("what the runner sent Core holds the %s", name)
		}
	}
	if strings.Contains(string(got.Log), secret) {
		t.Error("the session's output holds the repository credential")
	}
}

// httpRemote serves the bare repository of r over smart HTTP (git
// http-backend) on 127.0.0.1, to user:password only, and returns its URL.
func httpRemote(t *testing.T, r *remote, user, password string) string {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	git(t, r.work, "--git-dir="+r.url, "config", "http.receivepack", "true")
	backend := &cgi.Handler{
		Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.url), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(r.url)
}
