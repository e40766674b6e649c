package proc

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

// TestResultSaysHowItEnded: each ending reads as what happened, with the
// signal that ended the command by name (or its number's name) or its
// exit status: what the runner's log and a failed run's message show.
func TestResultSaysHowItEnded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    Result
		want string
	}{
		{Result{Reason: Exited, ExitCode: 0}, "exit status 0"},
		{Result{Reason: Exited, ExitCode: -1, Signal: syscall.SIGINT}, "killed by SIGINT"},
		{Result{Reason: Exited, ExitCode: -1, Signal: syscall.SIGSEGV}, "killed by signal segmentation fault"},
		{Result{Reason: Watchdog, ExitCode: 2}, "stopped: no output for too long (exit status 2)"},
		{Result{Reason: Deadline, ExitCode: -1, Signal: syscall.SIGTERM}, "stopped: past its timeout (killed by SIGTERM)"},
		{Result{Reason: FinalGrace, ExitCode: -1, Signal: syscall.SIGKILL}, "stopped: still running after its final line (killed by SIGKILL)"},
		{Result{Reason: Cancelled, ExitCode: 1}, "stopped: cancelled (exit status 1)"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}

// TestSpecDefaults: a spec that leaves its limits at 0 gets the documented
// ones — lines up to 64 MiB, 30 seconds to exit after the final line, 10
// seconds between SIGTERM and SIGKILL, the real clock; limits it sets are
// kept.
func TestSpecDefaults(t *testing.T) {
	t.Parallel()
	s, err := Spec{ID: "d", Path: "x"}.check()
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxLine != 64<<20 || s.FinalGrace != 30*time.Second || s.KillGrace != 10*time.Second || s.Clock == nil {
		t.Errorf("defaults: max line %d, final grace %s, kill grace %s, clock %v", s.MaxLine, s.FinalGrace, s.KillGrace, s.Clock)
	}
	if _, ok := s.Clock.(clock.Real); !ok {
		t.Errorf("clock %T, want the real one", s.Clock)
	}
	fk := clock.NewFake(time.Unix(0, 0))
	set := Spec{ID: "d", Path: "x", MaxLine: 5, FinalGrace: time.Minute, KillGrace: time.Second, Clock: fk}
	s, err = set.check()
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxLine != 5 || s.FinalGrace != time.Minute || s.KillGrace != time.Second || s.Clock != fk {
		t.Errorf("set limits changed: %+v", s)
	}
}

// TestSpecRefusesEachNegativeLimit: every limit is checked, each on its
// own; an environment entry without a key is refused like one without '='.
func TestSpecRefusesEachNegativeLimit(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]Spec{
		"max line":    {MaxLine: -1},
		"idle":        {Idle: -1},
		"timeout":     {Timeout: -1},
		"final grace": {FinalGrace: -1},
		"kill grace":  {KillGrace: -1},
		"env key":     {Env: []string{"=x"}},
		"id .":        {ID: "."},
	} {
		if s.ID == "" {
			s.ID = "ok"
		}
		s.Path = "x"
		if _, err := s.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := (Spec{ID: "ok", Path: "x", Env: []string{"A=", "B=1=2"}}).check(); err != nil {
		t.Errorf("an empty value or one with '=': %v", err)
	}
}

// TestStderrKeepsItsEnd: a Result keeps the last 8 KiB of stderr — the
// end, where a CLI says why it failed — however the output was split.
func TestStderrKeepsItsEnd(t *testing.T) {
	t.Parallel()
	var want strings.Builder
	tl := &tail{max: stderrTail}
	for i := 0; want.Len() < 3*stderrTail; i++ {
		chunk := strings.Repeat(string(rune('a'+i%26)), 1+i*37%900) + "\n"
		want.WriteString(chunk)
		if n, err := tl.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	all := want.String()
	if got := tl.String(); got != all[len(all)-8<<10:] {
		t.Errorf("kept %d bytes ending %q, want the last 8192 ending %q", len(got), got[max(0, len(got)-20):], all[len(all)-20:])
	}
}
