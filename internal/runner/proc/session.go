package proc

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/clock"
)

// MarkerEnv names the variable that marks every process of a session:
// MarkerEnv=<session id>. Sweep and the end of a session find the
// session's processes by it.
const MarkerEnv = "BALLET_SESSION"

// Defaults of the Spec durations.
const (
	DefaultFinalGrace = 30 * time.Second
	DefaultKillGrace  = 10 * time.Second
)

// pipeDelay bounds, in real time, the wait for the output pipes to close
// once the session's processes are gone: only a process that left the
// group and dropped the marker could still hold them.
const pipeDelay = 2 * time.Second

// stderrTail is how much of the end of stderr a Result keeps.
const stderrTail = 8 << 10

// Spec describes one session.
type Spec struct {
	// ID names the session: 1–128 of [A-Za-z0-9._-]. It marks every
	// process of the session (MarkerEnv) and names its state file.
	ID   string
	Path string   // the command: a path, or a name looked up in the runner's PATH
	Args []string // its arguments, without the command itself
	// Env is the whole environment of the command ("K=V"): nothing of the
	// runner's environment is inherited. MarkerEnv is added.
	Env []string
	Dir string // the working directory

	// OnLine is called with each line of stdout, without its line end, in
	// order, from one goroutine; the slice is valid only during the call.
	// truncated is set on a line that was cut at MaxLine bytes.
	OnLine func(line []byte, truncated bool)
	// Stderr, when set, receives stderr as it comes; the Result keeps its
	// last 8 KiB either way.
	Stderr io.Writer
	// MaxLine caps a stdout line (DefaultMaxLine when 0).
	MaxLine int

	// Idle stops the session when it printed nothing (stdout or stderr)
	// for that long; 0: no watchdog.
	Idle time.Duration
	// Timeout stops the session that long after its start; 0: no deadline.
	Timeout time.Duration
	// FinalGrace is how long the session may run on after Final
	// (DefaultFinalGrace when 0).
	FinalGrace time.Duration
	// KillGrace is how long a stopped session has between SIGTERM and
	// SIGKILL (DefaultKillGrace when 0).
	KillGrace time.Duration
	// TermInside sends the SIGTERM of a stop to the processes the command
	// started, not to the command itself: for a wrapper such as bwrap,
	// which would die of it at once and take the session down with no
	// clean end. The wrapper ends when what it runs ends. SIGKILL goes to
	// the whole group either way.
	TermInside bool
	// Clock runs every timer above (clock.Real when nil).
	Clock clock.Clock

	// StateDir, when set, holds a record of the session while it runs, for
	// Sweep after a runner that died.
	StateDir string

	// Handshake is set for a wrapper (bwrap) whose command is
	// HandshakeScript: the wrapper gets two extra files, the script says it
	// is running (every --die-with-parent of the wrapper armed) and waits
	// for the runner's go before it runs the session's command. Start
	// returns once it said go, or once the wrapper ended before it was
	// armed. A runner that dies before the go takes the command down with
	// it even where the wrapper's own death signal is not armed yet: the
	// script reads the end of the runner's pipe and exits.
	Handshake bool
}

// HandshakeScript is the first command of a wrapper with Spec.Handshake, a
// POSIX shell script run as `sh -c HandshakeScript NAME COMMAND ARGS…`:
// it writes one byte on file 4 (armed), reads the line "go" from file 3,
// and then runs COMMAND ARGS… in its place, without either file. When file
// 3 ends first (the runner is gone), it exits with HandshakeGone.
const HandshakeScript = `printf a >&4 && IFS= read -r go <&3 && [ "$go" = go ] && exec "$@" 3<&- 4>&-
echo "ballet: the runner went away before the session started" >&2
exit 125`

// HandshakeGone is the exit status of a HandshakeScript whose runner went
// away before its go.
const HandshakeGone = 125

// handshakeWait bounds, in real time, the wait for a wrapper to say it is
// armed: bwrap takes milliseconds; a wrapper still silent after it gets no
// go, and its script exits when it reaches the handshake.
const handshakeWait = 30 * time.Second

// Reason says why a session ended.
type Reason string

// The reasons a session ends.
const (
	Exited     Reason = "exited"      // the command ended by itself: see ExitCode and Signal
	Watchdog   Reason = "watchdog"    // nothing printed for Spec.Idle
	Deadline   Reason = "deadline"    // Spec.Timeout passed
	FinalGrace Reason = "final_grace" // still running Spec.FinalGrace after Final
	Cancelled  Reason = "cancelled"   // Stop, or the context ended
)

// Result is how a session ended.
type Result struct {
	Reason Reason
	// ExitCode is the command's exit status; -1 when a signal ended it.
	ExitCode int
	// Signal is the signal that ended the command, 0 when it exited.
	Signal syscall.Signal
	// Lines counts the stdout lines handed to OnLine; Truncated those that
	// were cut at Spec.MaxLine.
	Lines, Truncated int
	// Stderr is the end of what the command printed on stderr.
	Stderr string
	// Err reports trouble reading the output (the session ran regardless).
	Err error
}

// String describes the end in a few words, for logs and reports.
func (r Result) String() string {
	var how string
	if r.Signal != 0 {
		how = "killed by " + signalName(r.Signal)
	} else {
		how = fmt.Sprintf("exit status %d", r.ExitCode)
	}
	switch r.Reason {
	case Watchdog:
		return "stopped: no output for too long (" + how + ")"
	case Deadline:
		return "stopped: past its timeout (" + how + ")"
	case FinalGrace:
		return "stopped: still running after its final line (" + how + ")"
	case Cancelled:
		return "stopped: cancelled (" + how + ")"
	}
	return how
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return "signal " + s.String()
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// check validates the spec and fills in its defaults.
func (s Spec) check() (Spec, error) {
	switch {
	case !idRE.MatchString(s.ID) || s.ID == "." || s.ID == "..":
		return s, fmt.Errorf("proc: the session id %q must be 1–128 of [A-Za-z0-9._-]", s.ID)
	case s.Path == "":
		return s, errors.New("proc: the session has no command")
	case s.MaxLine < 0 || s.Idle < 0 || s.Timeout < 0 || s.FinalGrace < 0 || s.KillGrace < 0:
		return s, errors.New("proc: negative limits")
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return s, fmt.Errorf("proc: %q is not a K=V environment entry", kv)
		}
	}
	if s.MaxLine == 0 {
		s.MaxLine = DefaultMaxLine
	}
	if s.FinalGrace == 0 {
		s.FinalGrace = DefaultFinalGrace
	}
	if s.KillGrace == 0 {
		s.KillGrace = DefaultKillGrace
	}
	if s.Clock == nil {
		s.Clock = clock.Real{}
	}
	return s, nil
}

// env is the command's environment: Spec.Env with the marker, last (of
// duplicate keys os/exec keeps the last value: Spec.Env cannot forge it).
func (s Spec) env() []string {
	return append(slices.Clone(s.Env), Marker(s.ID))
}

// Marker is the environment entry that marks the processes of session id.
// A sandbox that clears the environment must pass it on.
func Marker(id string) string { return MarkerEnv + "=" + id }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "?")
}
