package proc

import (
	"os"
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
