package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/procgroup"
)

// Session is a running session. Its methods are safe for concurrent use.
type Session struct {
	spec   Spec
	cmd    *exec.Cmd
	record string // its state file, "" without Spec.StateDir

	final     chan struct{} // closed by Final
	finalOnce sync.Once
	stop      chan struct{} // closed by Stop
	stopOnce  sync.Once
	done      chan struct{} // closed when the session is over
	result    Result

	lastOutput atomic.Int64 // Spec.Clock's time of the last output, in unix ns
}

// Start starts the session's command. It runs until it ends by itself or
// is stopped (Final, Stop, ctx, or the limits of spec); Wait tells how it
// ended. The error is about starting only.
func Start(ctx context.Context, spec Spec) (*Session, error) {
	spec, err := spec.check()
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath(spec.Path)
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	defer devnull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("proc: %w", err)
	}
	s := &Session{
		spec:  spec,
		final: make(chan struct{}),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		cmd: &exec.Cmd{
			Path:   path,
			Args:   append([]string{spec.Path}, spec.Args...),
			Env:    spec.env(),
			Dir:    spec.Dir,
			Stdin:  devnull,
			Stdout: outW,
			Stderr: errW,
			// Setsid: a new session and process group (the group is
			// signalled as a whole; no controlling terminal). Pdeathsig:
			// the kernel kills the command when the runner dies.
			SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
		},
	}
	var hs *handshake
	if spec.Handshake {
		if hs, err = newHandshake(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
		s.cmd.ExtraFiles = []*os.File{hs.goR, hs.armedW} // files 3 and 4
	}
	s.lastOutput.Store(spec.Clock.Now().UnixNano())
	// The record exists before the process does: a runner that dies right
	// after the start leaves a record for Sweep.
	if spec.StateDir != "" {
		if s.record, err = writeRecord(spec.StateDir, record{ID: spec.ID}); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			hs.close()
			return nil, err
		}
	}
	err = s.cmd.Start()
	outW.Close()
	errW.Close()
	hs.started()
	if err != nil {
		outR.Close()
		errR.Close()
		hs.close()
		s.removeRecord()
		return nil, fmt.Errorf("proc: starting %s: %w", spec.Path, err)
	}
	pid := s.cmd.Process.Pid
	if s.record != "" {
		// A failure here only weakens the sweep after a runner death: the
		// marker still finds every process of the session.
		_, _ = writeRecord(spec.StateDir, record{ID: spec.ID, PID: pid, PGID: pid})
	}
	go s.run(ctx, outR, errR)
	hs.complete()
	return s, nil
}

// StartHandshaken starts cmd, a wrapper whose command is HandshakeScript,
// outside a Session: it gives cmd the handshake's files, starts it, and
// returns once it said go (or the wrapper ended before it was armed). cmd's
// ExtraFiles must be empty. For tools and tests; sessions use
// Spec.Handshake.
func StartHandshaken(cmd *exec.Cmd) error {
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("proc: a handshaken command has no extra files of its own")
	}
	hs, err := newHandshake()
	if err != nil {
		return err
	}
	cmd.ExtraFiles = []*os.File{hs.goR, hs.armedW}
	err = cmd.Start()
	hs.started()
	if err != nil {
		hs.close()
		return err
	}
	hs.complete()
	return nil
}

// handshake is the runner's side of Spec.Handshake: the wrapper's script
// writes on armedW once it runs and reads goR.
type handshake struct {
	goR, goW       *os.File
	armedR, armedW *os.File
}

func newHandshake() (*handshake, error) {
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: handshake: %w", err)
	}
	armedR, armedW, err := os.Pipe()
	if err != nil {
		goR.Close()
		goW.Close()
		return nil, fmt.Errorf("proc: handshake: %w", err)
	}
	return &handshake{goR: goR, goW: goW, armedR: armedR, armedW: armedW}, nil
}

// started closes the wrapper's ends in the runner once the wrapper has
// them (or failed to start): the script alone holds them then, so the
// runner reads the end of armed when the wrapper dies before its script
// ran, and the script the end of go when the runner dies.
func (h *handshake) started() {
	if h == nil {
		return
	}
	h.goR.Close()
	h.armedW.Close()
}

// complete waits for the script to say it is armed and says go; when the
// wrapper ended first, or stays silent past handshakeWait, it says nothing
// and the script exits when it reaches the handshake.
func (h *handshake) complete() {
	if h == nil {
		return
	}
	defer h.close()
	_ = h.armedR.SetReadDeadline(time.Now().Add(handshakeWait))
	var b [1]byte
	if n, _ := h.armedR.Read(b[:]); n == 1 {
		_, _ = h.goW.Write([]byte("go\n"))
	}
}

// close closes the runner's ends.
func (h *handshake) close() {
	if h == nil {
		return
	}
	h.goW.Close()
	h.armedR.Close()
	h.goR.Close()
	h.armedW.Close()
}

// PID is the process ID of the command, which is also its process group.
func (s *Session) PID() int { return s.cmd.Process.Pid }

// Final says that the command printed its final line: it now has
// Spec.FinalGrace to exit before it is stopped.
func (s *Session) Final() { s.finalOnce.Do(func() { close(s.final) }) }

// Stop stops the session (Cancelled): SIGTERM to its group, SIGKILL after
// Spec.KillGrace. It does not wait: see Wait.
func (s *Session) Stop() { s.stopOnce.Do(func() { close(s.stop) }) }

// Done is closed when the session is over.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait waits until the session is over and no process of it is left, and
// tells how it ended.
func (s *Session) Wait() Result {
	<-s.done
	return s.result
}

// activity records the time of every read that returned output.
type activity struct {
	r io.Reader
	s *Session
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.s.lastOutput.Store(a.s.spec.Clock.Now().UnixNano())
	}
	return n, err
}

// run supervises the session until its command has exited, then cleans up.
func (s *Session) run(ctx context.Context, outR, errR *os.File) {
	defer close(s.done)
	spec := s.spec
	pid := s.cmd.Process.Pid

	var readers sync.WaitGroup
	var lines, cut int
	var readErr error
	readers.Add(2)
	go func() {
		defer readers.Done()
		onLine := spec.OnLine
		if onLine == nil {
			onLine = func([]byte, bool) {}
		}
		lines, cut, readErr = readLines(activity{outR, s}, spec.MaxLine, onLine)
	}()
	stderr := &tail{max: stderrTail}
	go func() {
		defer readers.Done()
		var w io.Writer = stderr
		if spec.Stderr != nil {
			w = io.MultiWriter(stderr, spec.Stderr)
		}
		_, _ = io.Copy(w, activity{errR, s})
	}()

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		// Wait for the exit without reaping: the process group stays
		// reserved (its ID cannot be reused) until whatever is left of it
		// has been killed below.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()

	reason := s.supervise(ctx, pid, exited)

	// The command has exited. Kill what is left of its group, and any
	// process that left the group but still carries the marker, then reap.
	_ = procgroup.Signal(pid, syscall.SIGKILL)
	killMarked(spec.ID, pid)
	waitErr := s.cmd.Wait()

	pipesDone := make(chan struct{})
	go func() { readers.Wait(); close(pipesDone) }()
	var pipeErr error
	select {
	case <-pipesDone:
	case <-time.After(pipeDelay):
		pipeErr = errors.New("proc: a process outside the session kept its output open; closed")
		outR.Close()
		errR.Close()
		<-pipesDone
	}
	outR.Close()
	errR.Close()
	s.removeRecord()

	r := Result{Reason: reason, ExitCode: -1, Lines: lines, Truncated: cut, Stderr: stderr.String()}
	if st := s.cmd.ProcessState; st != nil {
		r.ExitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal()
		}
	}
	var exitErr *exec.ExitError
	r.Err = errors.Join(readErr, pipeErr)
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		r.Err = errors.Join(r.Err, fmt.Errorf("proc: %w", waitErr))
	}
	s.result = r
}

// supervise runs the session's timers until the command has exited and
// returns why it ended. The first reason to stop wins; stopping sends
// SIGTERM to the group, then SIGKILL after KillGrace.
func (s *Session) supervise(ctx context.Context, pid int, exited <-chan struct{}) Reason {
	spec := s.spec
	clk := spec.Clock
	var idle, deadline, final, kill clock.Timer
	defer func() {
		for _, t := range []clock.Timer{idle, deadline, final, kill} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	if spec.Idle > 0 {
		idle = clk.NewTimer(spec.Idle)
	}
	if spec.Timeout > 0 {
		deadline = clk.NewTimer(spec.Timeout)
	}
	reason := Exited
	stopping := false
	stop := func(r Reason) {
		if stopping {
			return
		}
		stopping, reason = true, r
		if spec.TermInside {
			for _, p := range scan("") {
				if p.pgid == pid && p.pid != pid {
					_ = syscall.Kill(p.pid, syscall.SIGTERM)
				}
			}
		} else {
			_ = procgroup.Signal(pid, syscall.SIGTERM)
		}
		kill = clk.NewTimer(spec.KillGrace)
	}
	finalSaid, stopSaid, ctxDone := s.final, s.stop, ctx.Done()
	for {
		select {
		case <-exited:
			return reason
		case <-chanOf(idle):
			idle = nil
			if quiet := clk.Now().Sub(time.Unix(0, s.lastOutput.Load())); quiet >= spec.Idle {
				stop(Watchdog)
			} else if !stopping {
				idle = clk.NewTimer(spec.Idle - quiet)
			}
		case <-chanOf(deadline):
			deadline = nil
			stop(Deadline)
		case <-finalSaid:
			finalSaid = nil
			if !stopping {
				final = clk.NewTimer(spec.FinalGrace)
			}
		case <-chanOf(final):
			final = nil
			stop(FinalGrace)
		case <-stopSaid:
			stopSaid = nil
			stop(Cancelled)
		case <-ctxDone:
			ctxDone = nil
			stop(Cancelled)
		case <-chanOf(kill):
			kill = nil
			_ = procgroup.Signal(pid, syscall.SIGKILL)
		}
	}
}

// chanOf is the channel of t, nil (never ready) when t is nil.
func chanOf(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}
