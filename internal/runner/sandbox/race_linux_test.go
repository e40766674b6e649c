package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/runner/proc"
)

// racer is the helper mode of a runner that dies (SIGKILL) RACE_AFTER_US
// microseconds after it starts a sandboxed session of its arguments, with
// its records in RACE_STATE.
func racer() {
	us, _ := strconv.Atoi(os.Getenv("RACE_AFTER_US"))
	time.AfterFunc(time.Duration(us)*time.Microsecond, func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	_, err := proc.Start(context.Background(), proc.Spec{ID: os.Getenv("RACE_ID"), Path: os.Args[1], Args: os.Args[2:],
		Env: os.Environ(), Dir: "/", TermInside: true, Handshake: true, StateDir: os.Getenv("RACE_STATE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	time.Sleep(10 * time.Minute)
}

// TestNoAgentOutlivesARunnerDyingAtItsStart: a runner killed at any moment
// of a session's start — before bwrap armed --die-with-parent inside the
// sandbox too — leaves no agent running: the handshake holds the agent back
// until the runner said go, and a runner that said go had seen everything
// armed. What bwrap's init may leave idle (it lost its parent before it
// armed its own death signal) the runner's start-up sweep removes.
func TestNoAgentOutlivesARunnerDyingAtItsStart(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	w := newWorld(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	agents, idle := 0, 0
	var ids []string
	for i, after := range []int{0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10000, 12000, 15000, 20000, 30000, 50000,
		0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10000, 12000, 15000, 20000, 30000, 50000} {
		id := fmt.Sprintf("race-%d-%d-%d", os.Getpid(), i, time.Now().UnixNano())
		ids = append(ids, id)
		cmd, err := w.sandbox.Wrap(Session{
			Command:   Command{Path: self, Env: []string{helperEnv + "=hang"}},
			Workspace: w.wsA, Home: w.homeA, ReadOnly: []string{filepath.Dir(self)},
		})
		if err != nil {
			t.Fatal(err)
		}
		r := exec.Command(self, append([]string{cmd.Path}, cmd.Args...)...)
		r.Env = append(cmd.Env, helperEnv+"=racer", "RACE_AFTER_US="+strconv.Itoa(after), "RACE_ID="+id, "RACE_STATE="+state)
		if err := r.Run(); err == nil {
			t.Fatal("the racer did not die")
		}
		// Within moments every process of the session is gone but an idle
		// bwrap init at most: the handshake's script exits once the
		// runner's end of its pipe is closed; the agent, if it had its go,
		// dies with its parents.
		var running []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			running = running[:0]
			for _, pid := range marked(proc.Marker(id)) {
				cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				name, _, _ := bytes.Cut(cl, []byte{0})
				switch {
				case len(cl) == 0: // gone, or a zombie: not running
				case filepath.Base(string(name)) == "bwrap":
					idle++
				default:
					running = append(running, fmt.Sprintf("%d %s", pid, name))
				}
			}
			if len(running) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, r := range running {
			agents++
			t.Errorf("a runner killed %d µs after a session's start left %s running", after, r)
			var pid int
			fmt.Sscan(r, &pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	swept, err := proc.Sweep(state)
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, s := range swept {
		killed += len(s.Killed)
	}
	t.Logf("30 runners killed during a session's start: %d processes of a session left running, %d sightings of bwrap processes (ending, or an idle init), %d processes swept", agents, idle, killed)
	for _, id := range ids {
		left := marked(proc.Marker(id))
		for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			left = marked(proc.Marker(id)) // killed: gone in a moment
		}
		if len(left) > 0 {
			t.Errorf("the sweep left %v of %s", left, id)
		}
	}
}
