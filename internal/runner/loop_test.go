//go:build linux

package runner_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/runner"
	"github.com/ballet/ballet/internal/runproto"
)

// The runner's loops on the fake clock: registration, heartbeats, leases,
// cancellations and the drain. The session is a stand-in CLI (a shell
// script that says it started and sleeps), unsandboxed: these tests are
// about the runner, the real CLIs are tested in session_test.go.

// fakeCLI is a claude-code stand-in: it answers --version, prints its init
// line with Ballet's MCP server connected, and sleeps.
const fakeCLI = `#!/bin/sh
if [ "$1" = "--version" ]; then echo "9.9.9 (fake)"; exit 0; fi
echo '{"type":"system","subtype":"init","session_id":"fake","mcp_servers":[{"name":"ballet","status":"connected"}]}'
exec sleep 600
`

// The timers a running session keeps on the clock besides the runner's
// heartbeat: its run's heartbeat, its checkpoints, its watchdog and its
// deadline.
const sessionTimers = 4

type loopWorld struct {
	*world
	clk *clock.Fake
}

func newLoopWorld(t *testing.T) *loopWorld {
	t.Helper()
	w := &world{t: t, core: newFakeCore(t), remote: newRemote(t), root: t.TempDir(), logs: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner log:\n%s", tail(w.logs.String(), 20000))
		}
	})
	return &loopWorld{world: w, clk: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))}
}

// options: the stand-in claude-code, no opencode, no sandbox, the default
// intervals on the fake clock (leases long-poll 1 s of real time).
func (w *loopWorld) options() runner.Options {
	cli := filepath.Join(w.root, "claude")
	writeFile(w.t, cli, fakeCLI)
	if err := os.Chmod(cli, 0o755); err != nil {
		w.t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Runner.Server = w.core.URL
	cfg.Runner.Workdir = filepath.Join(w.root, "runner")
	cfg.Runner.Sandbox = "none"
	cfg.Runner.Labels = map[string]string{"zone": "test"}
	cfg.Adapters.ClaudeCode.Command = cli
	cfg.Adapters.OpenCode.Command = filepath.Join(w.root, "no-opencode")
	return runner.Options{Config: cfg.Runner, Adapters: cfg.Adapters, Token: w.core.runnerToken, Version: "test",
		Environ: []string{"PATH=" + os.Getenv("PATH")}, Clock: w.clk,
		Log:    slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Timing: runner.Timing{LeaseWait: time.Second}}
}

// running starts a session of the stand-in and waits until all its timers
// and the runner's heartbeat wait on the clock.
func (w *loopWorld) running() *fcRun {
	w.t.Helper()
	ss := w.session("")
	ss.Stage.Model = ""
	run := w.core.enqueue(ss)
	waitFor(w.t, "the session's process", func() bool { return len(sessionProcs(run.ID)) > 0 })
	w.clk.BlockUntil(1 + sessionTimers)
	return run
}

// Registration tells Core the capacity, labels, adapters and version;
// each heartbeat, every 10 s, the sessions that run.
func TestRegistrationAndHeartbeats(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.start(w.options())
	run := w.running()
	rn := w.core.registered()[0]
	capacity := 2
	want := runproto.RunnerRegister{Name: rn.Reg.Name, Labels: map[string]string{"zone": "test"}, Capacity: &capacity,
		Adapters: []runproto.Adapter{{Name: "claude-code", Version: "9.9.9"}}, Version: "test", Sessions: []string{}}
	if !equalJSON(rn.Reg, want) || rn.Reg.Name == "" {
		t.Errorf("registration %+v, want %+v", rn.Reg, want)
	}
	if len(rn.Heartbeats) != 0 {
		t.Errorf("%d heartbeats before 10 s", len(rn.Heartbeats))
	}
	w.clk.Advance(10 * time.Second)
	w.core.wait("a heartbeat", func() bool { return len(w.core.runners[0].Heartbeats) == 1 && w.core.runs[run.ID].Heartbeats == 1 })
	if hb := w.core.registered()[0].Heartbeats[0]; !slices.Equal(hb.Sessions, []string{run.ID}) || hb.Draining || hb.Problem != "" {
		t.Errorf("heartbeat %+v", hb)
	}
}

// [runner] heartbeat sets both heartbeats' interval (a Core with a short
// [runs] grace needs them often): here every 3 s instead of 10 s.
func TestHeartbeatFromTheConfig(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	o := w.options()
	o.Config.Heartbeat = config.Duration{Duration: 3 * time.Second}
	w.start(o)
	run := w.running()
	w.clk.Advance(3 * time.Second)
	w.core.wait("a runner and a run heartbeat after 3 s", func() bool {
		return len(w.core.runners[0].Heartbeats) == 1 && w.core.runs[run.ID].Heartbeats == 1
	})
}

// A run the runner heartbeat's answer names is stopped at once, and
// finished as such.
func TestHeartbeatCancelStopsTheSession(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.start(w.options())
	run := w.running()
	w.core.update(func() { run.Runner = "another-runner" }) // no longer this runner's
	w.clk.Advance(10 * time.Second)
	got := w.core.finished(run)
	if f := got.Finishes[0]; !strings.Contains(f.Error, "cancelled: Core asked the runner to stop this session") || f.ExitStatus != 143 {
		t.Errorf("finish %+v", f)
	}
	waitFor(t, "the session's processes to end", func() bool { return len(sessionProcs(run.ID)) == 0 })
}

// A run whose own heartbeat answers cancelled is stopped too.
func TestRunHeartbeatCancelStopsTheSession(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	o := w.options()
	o.Timing.Heartbeat = time.Hour // only the run's heartbeat comes within the test
	w.start(o)
	run := w.running()
	w.core.cancel(run)
	w.clk.Advance(10 * time.Second)
	got := w.core.finished(run)
	if f := got.Finishes[0]; got.Status != runproto.StatusCancelled || !strings.Contains(f.Error, "cancelled: the ticket was paused") {
		t.Errorf("run %s, finish %+v", got.Status, f)
	}
}

// A registration Core cannot take now (503) is tried again after 1, 2, 4 s
// on the clock.
func TestRegistrationRetries(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.core.refuse = http.StatusServiceUnavailable
	w.start(w.options())
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		w.core.wait("a registration", func() bool { return registrations(w.core) == i+1 })
		w.clk.BlockUntil(1)
		if i == 2 {
			w.core.update(func() { w.core.refuse = 0 })
		}
		w.clk.Advance(wait - time.Millisecond)
		if n := registrations(w.core); n != i+1 {
			t.Fatalf("%d registrations before the wait of %s was over", n, wait)
		}
		w.clk.Advance(time.Millisecond)
	}
	w.core.wait("the runner to register", func() bool { return len(w.core.runners) == 1 })
}

func registrations(fc *fakeCore) int {
	n := 0
	for _, r := range fc.requests {
		if r.Path == "/api/v1/runners" {
			n++
		}
	}
	return n
}

// Without any agent CLI the runner refuses to start, saying how to fix
// it, and never registers.
func TestRefusesToStartWithoutACLI(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	o := w.options()
	o.Adapters.ClaudeCode.Command = filepath.Join(w.root, "no-claude")
	r, err := runner.New(o)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "no agent CLI found") || !strings.Contains(err.Error(), "[adapters.<name>] command") {
		t.Fatalf("Run: %v", err)
	}
	if n := len(w.core.allRequests()); n != 0 {
		t.Errorf("%d requests to Core", n)
	}
}

// With KeepGoing (ballet up) it registers with the problem, heartbeats
// with it, and leases nothing.
func TestKeepGoingRegistersTheProblem(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	o := w.options()
	o.Adapters.ClaudeCode.Command = filepath.Join(w.root, "no-claude")
	o.KeepGoing = true
	w.core.enqueue(w.session(""))
	w.start(o)
	w.core.wait("the registration", func() bool { return len(w.core.runners) == 1 })
	for i := 1; i <= 3; i++ {
		w.clk.BlockUntil(1)
		w.clk.Advance(10 * time.Second)
		w.core.wait("a heartbeat", func() bool { return len(w.core.runners[0].Heartbeats) == i })
	}
	rn := w.core.registered()[0]
	if !strings.Contains(rn.Reg.Problem, "no agent CLI found") || len(rn.Reg.Adapters) != 0 || rn.Heartbeats[2].Problem != rn.Reg.Problem {
		t.Errorf("registration %+v, last heartbeat %+v", rn.Reg, rn.Heartbeats[2])
	}
	for _, r := range w.core.allRequests() {
		if strings.HasSuffix(r.Path, "/lease") {
			t.Fatal("a runner with a problem leased")
		}
	}
}

// A lease Core cannot answer now is tried again after 1 s on the clock.
func TestLeaseRetries(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.core.overloaded = 1
	w.start(w.options())
	w.core.wait("a refused lease", func() bool { return leases(w.core) == 1 })
	w.clk.BlockUntil(2) // the heartbeat and the lease's retry
	w.clk.Advance(999 * time.Millisecond)
	if n := leases(w.core); n != 1 {
		t.Fatalf("%d leases before the retry's second", n)
	}
	w.clk.Advance(time.Millisecond)
	run := w.core.enqueue(w.session(""))
	w.core.wait("the run leased", func() bool { return run.Runner != "" })
}

func leases(fc *fakeCore) int {
	n := 0
	for _, r := range fc.requests {
		if strings.HasSuffix(r.Path, "/lease") {
			n++
		}
	}
	return n
}

// When Core no longer knows the runner (404 to a heartbeat), it registers
// again.
func TestForgottenRunnerRegistersAgain(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	w.start(w.options())
	w.core.wait("the registration", func() bool { return len(w.core.runners) == 1 })
	w.core.update(func() { w.core.runners[0].ID = "forgotten" })
	w.clk.BlockUntil(1)
	w.clk.Advance(10 * time.Second)
	w.core.wait("a second registration", func() bool { return len(w.core.runners) == 2 })
}

// When Core refuses the runner's token, it stops its sessions, finishing
// them, and Run fails.
func TestRefusedTokenStopsTheRunner(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	rr := w.start(w.options())
	run := w.running()
	w.core.update(func() { w.core.refuse = http.StatusUnauthorized })
	w.clk.Advance(10 * time.Second)
	select {
	case <-rr.done:
	case <-time.After(hangGuard):
		t.Fatal("the runner did not stop")
	}
	if rr.err == nil || !strings.Contains(rr.err.Error(), "refused the runner token") {
		t.Errorf("Run: %v", rr.err)
	}
	got := w.core.finished(run)
	if f := got.Finishes[0]; !strings.Contains(f.Error, "the runner stopped: runner: Core refused the runner token") {
		t.Errorf("finish %+v", f)
	}
}

// The drain on the clock: the session runs on for [runner] drain, then is
// stopped and finished as interrupted (runner_drain); Run returns.
func TestDrainOnTheClock(t *testing.T) {
	t.Parallel()
	w := newLoopWorld(t)
	rr := w.start(w.options())
	run := w.running()
	rr.cancel()
	w.clk.BlockUntil(2 + sessionTimers) // the heartbeat, the session's, the drain's
	w.clk.Advance(time.Minute - time.Millisecond)
	select {
	case <-rr.done:
		t.Fatal("the runner stopped before the drain time ran out")
	default:
	}
	w.clk.Advance(time.Millisecond)
	if err := rr.stop(t); err != nil {
		t.Fatal(err)
	}
	got := w.core.snapshot(run)
	if len(got.Finishes) != 1 || !strings.Contains(got.Finishes[0].Error, "drain time (1m0s) ran out") ||
		got.Finishes[0].Interrupted != runproto.ReasonRunnerDrain {
		t.Errorf("finishes %+v", got.Finishes)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
