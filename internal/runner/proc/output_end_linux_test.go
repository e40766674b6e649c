package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputReadToTheEnd: a session is over only once its whole output
// was handed over, even when the runner is still busy with a line after
// the command exited: every line arrives, Lines counts them, and nothing
// is reported as trouble.
func TestOutputReadToTheEnd(t *testing.T) {
	t.Parallel()
	var s *Session
	ready := make(chan struct{})
	var got []string
	early := false
	onLine := func(b []byte, _ bool) {
		got = append(got, string(b))
		if len(got) > 1 {
			return
		}
		// Busy with the first line while the command prints the rest
		// and exits: the session must not be over meanwhile.
		<-ready
		select {
		case <-s.Done():
			early = true
		case <-time.After(300 * time.Millisecond):
		}
	}
	env := []string{helperEnv + "=print", "GOCOVERDIR=" + t.TempDir()}
	s = start(t, Spec{Args: []string{"one", "two", "three"}, Env: env, OnLine: onLine})
	close(ready)
	r := wait(t, s)
	if early {
		t.Error("the session was over while its output was still being read")
	}
	if r.Lines != 3 || r.Err != nil || len(got) != 3 || got[2] != "three" {
		t.Errorf("result %+v, lines %q; want the three lines", r, got)
	}
}

// TestSessionsLeaveNoOpenFiles: a session's output pipes are closed when
// it is over; a runner running session after session does not run out
// of file descriptors.
func TestSessionsLeaveNoOpenFiles(t *testing.T) {
	// Not parallel: it counts this process's open files.
	run := func() {
		env := []string{helperEnv + "=print", "GOCOVERDIR=" + t.TempDir()}
		s, err := Start(t.Context(), Spec{ID: "files", Path: testBinary(t), Args: []string{"x"}, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, s)
	}
	run() // whatever the runtime opens once (its poller) is open now
	before := openFiles(t)
	for range 3 {
		run()
	}
	if after := openFiles(t); after > before {
		t.Errorf("%d open files after three sessions, %d before", after, before)
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestOutputHeldOutsideTheSession: a process that left the session (its
// own session, no marker) and kept the session's stdout open does not
// keep the session from ending: its output is closed after a bounded
// wait, and the result says so.
func TestOutputHeldOutsideTheSession(t *testing.T) {
	t.Parallel()
	out := make(lines, 10)
	s := start(t, Spec{Env: []string{helperEnv + "=escape", "GOCOVERDIR=" + t.TempDir()}, OnLine: out.onLine})
	var escaped int
	for escaped == 0 { // the grandchild says "ready" on the same stdout, maybe first
		fmt.Sscanf(out.next(t, ""), "escaped %d", &escaped)
	}
	t.Cleanup(func() { _ = syscall.Kill(escaped, syscall.SIGKILL) })
	r := wait(t, s)
	if r.Reason != Exited || r.Err == nil || !strings.Contains(r.Err.Error(), "kept its output open") {
		t.Errorf("result %+v, want an exit with the held output reported", r)
	}
}

// TestNoTimerOutlivesTheSession: a session that armed every timer (the
// watchdog, the deadline, the final grace and the kill grace) leaves none
// of them running once it is over.
func TestNoTimerOutlivesTheSession(t *testing.T) {
	t.Parallel()
	clk := fake()
	out := make(lines, 10)
	s := start(t, Spec{Env: []string{helperEnv + "=hang"}, OnLine: out.onLine, Clock: clk,
		Idle: time.Hour, Timeout: time.Hour, FinalGrace: time.Hour, KillGrace: time.Hour})
	out.next(t, "ready")
	s.Final()
	clk.BlockUntil(3) // the watchdog, the deadline, the final grace
	s.Stop()          // SIGTERM ends the helper; the kill grace was armed
	if r := wait(t, s); r.Reason != Cancelled || r.Signal != syscall.SIGTERM {
		t.Fatalf("result %+v, want cancelled by SIGTERM", r)
	}
	if n := clk.Waiters(); n != 0 {
		t.Errorf("%d timers still running after the session", n)
	}
}

// TestStderrIsPassedOn: Spec.Stderr receives what the command prints on
// stderr, and the result keeps it too.
func TestStderrIsPassedOn(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	env := []string{helperEnv + "=print", "GOCOVERDIR=" + t.TempDir()}
	r := wait(t, start(t, Spec{Env: env, Stderr: &stderr}))
	if stderr.String() != "some trouble\n" || r.Stderr != "some trouble\n" {
		t.Errorf("stderr passed on %q, kept %q; want both some trouble", stderr.String(), r.Stderr)
	}
}

// TestStartFailuresLeaveNothing: a session that cannot start — its state
// folder cannot be written, its working folder does not exist — leaves
// no open file and no record behind.
func TestStartFailuresLeaveNothing(t *testing.T) {
	// Not parallel: it counts this process's open files.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"state folder a file", Spec{StateDir: notDir}},
		{"no working folder", Spec{StateDir: state, Dir: filepath.Join(t.TempDir(), "missing")}},
	} {
		spec := c.spec
		spec.ID, spec.Path, spec.Env = "fails", testBinary(t), []string{helperEnv + "=hang"}
		before := openFiles(t)
		if s, err := Start(t.Context(), spec); err == nil {
			s.Stop()
			wait(t, s)
			t.Fatalf("%s: started", c.name)
		}
		if after := openFiles(t); after != before {
			t.Errorf("%s: %d open files after, %d before", c.name, after, before)
		}
	}
	if left, _ := os.ReadDir(state); len(left) != 0 {
		t.Errorf("the state folder holds %v after a failed start", left)
	}
}
