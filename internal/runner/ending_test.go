//go:build linux

package runner_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/runner"
	"github.com/ballet/ballet/internal/runproto"
)

// How a session's ending becomes its finish, on the fake clock with a
// scripted claude-code stand-in (no model, no sandbox): the exit status
// and error reported, the usage, the work published or kept in the
// stage's checkpoint, and the checkpoint dropped only after a run that
// ended its stage. The real CLIs' endings are in session_test.go and
// checkpoint_test.go; these pin each rule of session.ended on its own.

// claude-code's stream-json lines the stand-ins print.
const (
	initLine = `{"type":"system","subtype":"init","session_id":"scripted","mcp_servers":[{"name":"ballet","status":"connected"}]}`
	// One model answer calling submit_report, with its usage so far.
	reportCall  = `{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__ballet__submit_report","input":{"outcome":"done","summary":"Add the health endpoint"}}],"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":7}}}`
	reportTaken = `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"report recorded"}]}}`
	// The result line: the session's whole usage and cost.
	resultLine      = `{"type":"result","subtype":"success","is_error":false,"result":"Done.","total_cost_usd":0.25,"usage":{"input_tokens":1000,"output_tokens":200,"cache_read_input_tokens":50,"cache_creation_input_tokens":70}}`
	resultErrorLine = `{"type":"result","subtype":"error_during_execution","is_error":true,"result":"the model API failed","total_cost_usd":0.01,"usage":{"input_tokens":10,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}`
)

// resultUsage is what resultLine tells.
var resultUsage = runproto.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 50, CacheWriteTokens: 70, CostUSD: 0.25}

// scripted is the loop world's options with a claude-code stand-in that
// answers --version and otherwise runs body (sh, in the session's
// workspace).
func (w *loopWorld) scripted(body string) runner.Options {
	o := w.options()
	writeFile(w.t, o.Adapters.ClaudeCode.Command,
		"#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo \"9.9.9 (fake)\"; exit 0; fi\n"+body+"\n")
	return o
}

// say is a shell line printing each of lines on its own line.
func say(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("printf '%s\\n' '" + l + "'\n")
	}
	return b.String()
}

// enqueueDone queues a run whose session reports done (Core records the
// report's outcome as the MCP tool would).
func (w *loopWorld) enqueueDone() *fcRun {
	ss := w.session("")
	ss.Stage.Model = ""
	run := w.core.enqueue(ss)
	w.core.update(func() { run.Outcome = "done" })
	return run
}

// A session that reported done and exited 0: its work is published on
// ballet/<KEY>, the finish says so with the result line's usage, and the
// stage's checkpoint (of an earlier session) is dropped.
func TestDoneSessionPublishesAndDropsTheCheckpoint(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	seed := w.remote.seedCheckpoint()
	run := w.enqueueDone()
	w.start(w.scripted("echo health > health.txt\n" + say(initLine, reportCall, reportTaken, resultLine)))
	got := w.core.finished(run)
	f := got.Finishes[0]
	if f.ExitStatus != 0 || f.Error != "" || got.Status != runproto.StatusSucceeded {
		t.Fatalf("run %s, finish %+v", got.Status, f)
	}
	if f.Usage == nil || *f.Usage != resultUsage {
		t.Errorf("finish usage %+v, the result line told %+v", f.Usage, resultUsage)
	}
	branch := w.remote.ref("refs/heads/ballet/ACME-1")
	if branch == "" || w.remote.show(branch, "health.txt") != "health\n" || w.remote.show(branch, "seed.txt") != "seed\n" {
		t.Fatalf("branch ballet/ACME-1 at %q lacks the session's work (files %v)", branch, w.remote.files(branch))
	}
	// At least the session's own commit is ahead of main.
	if f.BranchAhead == nil || *f.BranchAhead < 1 {
		t.Errorf("finish branch_ahead %v, want the commits ahead of main", f.BranchAhead)
	}
	waitFor(t, "the checkpoint "+seed+" to be dropped", func() bool { return w.remote.ref(checkpointRef) == "" })
}

// The same session when Core finished the run failed (its outcome was
// never recorded): the work is still published, the checkpoint kept.
func TestDoneSessionOfAFailedRunKeepsTheCheckpoint(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	seed := w.remote.seedCheckpoint()
	ss := w.session("")
	ss.Stage.Model = ""
	run := w.core.enqueue(ss) // no outcome: Core fails the run
	w.start(w.scripted("echo health > health.txt\n" + say(initLine, reportCall, reportTaken, resultLine)))
	got := w.core.finished(run)
	if f := got.Finishes[0]; f.ExitStatus != 0 || got.Status != runproto.StatusFailed {
		t.Fatalf("run %s, finish %+v", got.Status, f)
	}
	w.runnerIdle(t)
	if c := w.remote.ref(checkpointRef); c == "" {
		t.Errorf("the checkpoint (was %s) was dropped after a failed run", seed)
	}
}

// runnerIdle waits until the runner runs no session any more (its
// heartbeat lists none): the session has ended whole.
func (w *loopWorld) runnerIdle(t *testing.T) {
	t.Helper()
	n0 := len(w.core.registered()[0].Heartbeats)
	w.advanceUntil(t, "a heartbeat listing no session", func() bool {
		hbs := w.core.registered()[0].Heartbeats
		return len(hbs) > n0 && len(hbs[len(hbs)-1].Sessions) == 0
	})
}

// A CLI that exits non-zero without a report: the finish has its status,
// its stderr and the missing report; nothing is published and its work
// is kept in the stage's checkpoint.
func TestFailedExitKeepsTheWorkInTheCheckpoint(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	run := w.enqueueDone() // even with an outcome recorded, exit 3 fails the run
	w.start(w.scripted("echo half > work.txt\n" + say(initLine) + "echo 'boom: out of disk' >&2\nexit 3"))
	got := w.core.finished(run)
	f := got.Finishes[0]
	for _, want := range []string{"the agent CLI exited with status 3: boom: out of disk", "the session ended without submit_report"} {
		if !strings.Contains(f.Error, want) {
			t.Errorf("finish error %q lacks %q", f.Error, want)
		}
	}
	if f.ExitStatus != 3 || got.Status != runproto.StatusFailed || f.BranchAhead != nil {
		t.Errorf("run %s, finish %+v", got.Status, f)
	}
	if b := w.remote.ref("refs/heads/ballet/ACME-1"); b != "" {
		t.Errorf("a failed session's work was published at %s", b)
	}
	w.runnerIdle(t)
	c := w.remote.ref(checkpointRef)
	if c == "" || w.remote.show(c, "work.txt") != "half\n" {
		t.Errorf("the checkpoint %q does not keep the failed session's work", c)
	}
}

// A CLI killed by a signal reports 128 + the signal, however it printed
// a report and a clean result line before.
func TestKilledCLIReportsTheSignal(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	run := w.enqueueDone()
	w.start(w.scripted("echo x > work.txt\n" + say(initLine, reportCall, reportTaken) + "kill -KILL $$"))
	got := w.core.finished(run)
	f := got.Finishes[0]
	if f.ExitStatus != 137 || !strings.Contains(f.Error, "the agent CLI exited with status 137") || got.Status != runproto.StatusFailed {
		t.Errorf("run %s, finish %+v", got.Status, f)
	}
	if b := w.remote.ref("refs/heads/ballet/ACME-1"); b != "" {
		t.Errorf("a killed session's work was published at %s", b)
	}
}

// A CLI that exits 0 after a result line in error: the error is the
// CLI's, the exit stays 0, the run fails and nothing is published.
func TestResultErrorFailsACleanExit(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	run := w.enqueueDone()
	w.start(w.scripted("echo x > work.txt\n" + say(initLine, reportCall, reportTaken, resultErrorLine)))
	got := w.core.finished(run)
	f := got.Finishes[0]
	if !strings.Contains(f.Error, "the model API failed") || strings.Contains(f.Error, "exited with status") || f.ExitStatus != 0 {
		t.Errorf("finish %+v", f)
	}
	if b := w.remote.ref("refs/heads/ballet/ACME-1"); b != "" {
		t.Errorf("the work of a session in error was published at %s", b)
	}
}

// advanceUntil moves the clock a second at a time until cond holds
// (failing after hangGuard of real time): for timers a session sets at a
// moment the test cannot see, and git work done between them.
func (w *loopWorld) advanceUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", hangGuard, what)
		}
		w.clk.Advance(time.Second)
		time.Sleep(10 * time.Millisecond)
	}
}

// resultLogged waits until run's log holds the CLI's result line: its
// final-line grace then runs on the clock.
func (w *loopWorld) resultLogged(t *testing.T, run *fcRun) {
	t.Helper()
	waitFor(t, "the result line in the run's log", func() bool {
		return strings.Contains(string(w.core.snapshot(run).Log), `"type":"result"`)
	})
}

func finishedOnce(w *loopWorld, run *fcRun) func() bool {
	return func() bool { return len(w.core.snapshot(run).Finishes) > 0 }
}

// A CLI that prints its final line and then hangs (both CLIs do at
// times) is stopped after the final grace (30 s): a clean report is a
// success, published; in error, it is a failure saying so.
func TestHangAfterTheFinalLine(t *testing.T) {
	t.Parallel()
	t.Run("reported", func(t *testing.T) {
		t.Parallel()
		w := newLoopWorld(t)
		run := w.enqueueDone()
		w.start(w.scripted("echo health > health.txt\n" + say(initLine, reportCall, reportTaken, resultLine) + "exec sleep 600"))
		w.resultLogged(t, run)
		w.advanceUntil(t, "the finish", finishedOnce(w, run))
		got := w.core.snapshot(run)
		f := got.Finishes[0]
		if f.ExitStatus != 0 || f.Error != "" || got.Status != runproto.StatusSucceeded {
			t.Errorf("run %s, finish %+v", got.Status, f)
		}
		if b := w.remote.ref("refs/heads/ballet/ACME-1"); b == "" || w.remote.show(b, "health.txt") != "health\n" {
			t.Errorf("the work of a session that hung after its report was not published (%q)", b)
		}
		if !strings.Contains(w.logs.String(), "did not exit after its final line") {
			t.Error("no warning of the hang in the runner's log")
		}
	})
	t.Run("in error", func(t *testing.T) {
		t.Parallel()
		w := newLoopWorld(t)
		run := w.enqueueDone()
		w.start(w.scripted(say(initLine, reportCall, reportTaken, resultErrorLine) + "exec sleep 600"))
		w.resultLogged(t, run)
		w.advanceUntil(t, "the finish", finishedOnce(w, run))
		f := w.core.snapshot(run).Finishes[0]
		if !strings.Contains(f.Error, "stopped: still running 30s after its final line") || !strings.Contains(f.Error, "the model API failed") {
			t.Errorf("finish %+v", f)
		}
	})
	t.Run("no report", func(t *testing.T) {
		t.Parallel()
		w := newLoopWorld(t)
		run := w.enqueueDone()
		w.start(w.scripted(say(initLine, resultLine) + "exec sleep 600"))
		w.resultLogged(t, run)
		w.advanceUntil(t, "the finish", finishedOnce(w, run))
		f := w.core.snapshot(run).Finishes[0]
		if f.Error != "the session ended without submit_report" {
			t.Errorf("finish %+v", f)
		}
	})
}

// A session's usage reaches Core with its run's heartbeats while it runs
// (a runner killed later leaves it counted), sent again only when it grew.
func TestRunningUsageSentWhenItGrows(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.start(w.scripted(say(initLine, reportCall) + "exec sleep 600"))
	run := w.running()
	usagePosts := func() int {
		n := 0
		for _, r := range w.core.allRequests() {
			if r.Path == "/api/v1/runs/"+run.ID+"/usage" {
				n++
			}
		}
		return n
	}
	w.clk.Advance(10 * time.Second)
	w.core.wait("the usage so far", func() bool { return run.Usage.InputTokens != 0 })
	u := w.core.snapshot(run).Usage
	if u.InputTokens != 100 || u.OutputTokens != 20 || u.CacheReadTokens != 5 || u.CacheWriteTokens != 7 {
		t.Errorf("usage so far %+v, the answer told 100/20/5/7", u)
	}
	w.advanceUntil(t, "two more run heartbeats", func() bool { return w.core.snapshot(run).Heartbeats >= 3 })
	if n := usagePosts(); n != 1 {
		t.Errorf("%d usage reports for a usage that did not grow, want 1", n)
	}
}

// A finish Core refuses for good (404: it gave the run up) is not tried
// again, and the stage's checkpoint stays.
func TestFinishRetries(t *testing.T) {
	t.Parallel()
	finishes := func(w *loopWorld, run *fcRun) []int {
		var st []int
		for _, r := range w.core.allRequests() {
			if r.Path == "/api/v1/runs/"+run.ID+"/finish" {
				st = append(st, r.Status)
			}
		}
		return st
	}
	t.Run("gone", func(t *testing.T) {
		t.Parallel()
		w := newLoopWorld(t)
		w.core.finishRefuse = []int{404}
		seed := w.remote.seedCheckpoint()
		run := w.enqueueDone()
		w.start(w.scripted(say(initLine, reportCall, reportTaken, resultLine)))
		waitFor(t, "a refused finish", func() bool { return len(finishes(w, run)) == 1 })
		w.runnerIdle(t)
		if st := finishes(w, run); !slices.Equal(st, []int{404}) {
			t.Errorf("finish answers %v, want one 404 and no retry", st)
		}
		if c := w.remote.ref(checkpointRef); c == "" {
			t.Errorf("the checkpoint (was %s) was dropped after a finish Core never took", seed)
		}
		if !strings.Contains(w.logs.String(), "finish=gone") {
			t.Error("the log does not say Core no longer takes the finish")
		}
	})
}
