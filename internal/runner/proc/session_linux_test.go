package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ballet/ballet/internal/clock"
)

// hangGuard bounds every wait of these tests on a real process: it turns a
// hang into a failure. It is no speed limit.
const hangGuard = time.Minute

func testBinary(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lines collects a session's stdout lines.
type lines chan string

func (l lines) onLine(b []byte, _ bool) { l <- string(b) }

// next waits for the next line and checks it.
func (l lines) next(t *testing.T, want string) string {
	t.Helper()
	select {
	case got := <-l:
		if want != "" && got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
		return got
	case <-time.After(hangGuard):
		t.Fatalf("no line %q within %s", want, hangGuard)
	}
	return ""
}

func start(t *testing.T, spec Spec) *Session {
	t.Helper()
	if spec.ID == "" {
		spec.ID = "s-" + strings.ReplaceAll(t.Name(), "/", "-")
	}
	if spec.Path == "" {
		spec.Path = testBinary(t)
	}
	s, err := Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		wait(t, s)
	})
	return s
}

func wait(t *testing.T, s *Session) Result {
	t.Helper()
	select {
	case <-s.Done():
		return s.Wait()
	case <-time.After(hangGuard):
		t.Fatalf("the session did not end within %s", hangGuard)
	}
	return Result{}
}

// openWriter opens a FIFO for writing, which waits for its reader.
func openWriter(t *testing.T, fifo string) *os.File {
	t.Helper()
	type opened struct {
		f   *os.File
		err error
	}
	c := make(chan opened, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		c <- opened{f, err}
	}()
	select {
	case o := <-c:
		if o.err != nil {
			t.Fatal(o.err)
		}
		t.Cleanup(func() { o.f.Close() })
		return o.f
	case <-time.After(hangGuard):
		t.Fatalf("nobody opened %s for reading", fifo)
	}
	return nil
}

func fake() *clock.Fake { return clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) }

// TestEnvironment: the command gets exactly the given environment plus the
// marker, its working directory, stdin /dev/null, and its own session and
// process group.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := make(lines, 10)
	s := start(t, Spec{ID: "env-1", Env: []string{helperEnv + "=env", "A=1", MarkerEnv + "=forged"}, Dir: dir, OnLine: out.onLine})
	r := wait(t, s)
	if r.Reason != Exited || r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	var got struct {
		Env            []string `json:"env"`
		Dir            string   `json:"dir"`
		PID            int      `json:"pid"`
		PGID           int      `json:"pgid"`
		SID            int      `json:"sid"`
		StdinIsDevnull bool     `json:"stdin_is_devnull"`
	}
	if err := json.Unmarshal([]byte(out.next(t, "")), &got); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.Env)
	if want := []string{"A=1", MarkerEnv + "=env-1", helperEnv + "=env"}; !slices.Equal(got.Env, want) {
		t.Errorf("environment %q, want %q (nothing inherited, the marker not forgeable)", got.Env, want)
	}
	if got.Dir != dir {
		t.Errorf("working directory %s, want %s", got.Dir, dir)
	}
	if got.PID != s.PID() || got.PGID != got.PID || got.SID != got.PID {
		t.Errorf("pid %d, process group %d, session %d: want its own group and session (%d)", got.PID, got.PGID, got.SID, s.PID())
	}
	if !got.StdinIsDevnull {
		t.Error("stdin is not /dev/null")
	}
}

// TestExit: the exit status, stdout lines and the end of stderr.
func TestExit(t *testing.T) {
	t.Parallel()
	out := make(lines, 10)
	// GOCOVERDIR: a test binary built with -cover (go test -cover, the
	// mutation tool) warns on stderr at exit without it.
	env := []string{helperEnv + "=print", "PROC_TEST_EXIT=3", "GOCOVERDIR=" + t.TempDir()}
	s := start(t, Spec{Args: []string{"one", "two"}, Env: env, OnLine: out.onLine})
	r := wait(t, s)
	out.next(t, "one")
	out.next(t, "two")
	if r.Reason != Exited || r.ExitCode != 3 || r.Signal != 0 || r.Lines != 2 || r.Stderr != "some trouble\n" || r.Err != nil {
		t.Fatalf("%+v", r)
	}
	if got := r.String(); got != "exit status 3" {
		t.Errorf("String() = %q", got)
	}
}

// TestHugeLine: a 40 MiB line from a real process arrives whole; under a
// 1 MiB cap it is cut and marked, and the next line is intact.
func TestHugeLine(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{0, 1 << 20} {
		var got []line
		s := start(t, Spec{Env: []string{helperEnv + "=huge"}, MaxLine: limit, OnLine: func(b []byte, cut bool) {
			got = append(got, line{string(b), cut})
		}})
		r := wait(t, s)
		want := 40 << 20
		if limit > 0 {
			want = limit
		}
		if r.Reason != Exited || r.ExitCode != 0 || len(got) != 3 || got[0].text != "before" || len(got[1].text) != want ||
			got[1].cut != (limit > 0) || got[2].text != "after" || r.Truncated != map[bool]int{false: 0, true: 1}[limit > 0] {
			t.Fatalf("limit %d: %d lines, result %+v", limit, len(got), r)
		}
	}
}

// TestWatchdog: a session that prints nothing for Idle is stopped; output
// pushes the watchdog back.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	clk := fake()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	out := make(lines, 10)
	s := start(t, Spec{Env: []string{helperEnv + "=echo", "PROC_TEST_FIFO=" + fifo}, Idle: 10 * time.Second, KillGrace: time.Hour, Clock: clk, OnLine: out.onLine})
	w := openWriter(t, fifo)
	clk.BlockUntil(1) // the watchdog
	clk.Advance(6 * time.Second)
	fmt.Fprintln(w, "a")
	out.next(t, "a") // output at +6 s

	// At +10 s the watchdog looks: 4 s of quiet only, so it waits again
	// (a new timer) instead of stopping.
	clk.Advance(4 * time.Second)
	clk.BlockUntil(1)
	// Had it stopped, the helper would have had SIGTERM (its default
	// action kills it) before this line, and would not echo it.
	fmt.Fprintln(w, "b")
	select {
	case got := <-out:
		if got != "b" {
			t.Fatalf("line %q", got)
		}
	case <-s.Done():
		t.Fatalf("stopped at +10 s though it printed at +6 s: %+v", s.Wait())
	}
	// Output at +10 s: quiet from +10 s to +20 s.
	clk.Advance(6 * time.Second)
	clk.BlockUntil(1)
	clk.Advance(4 * time.Second)
	r := wait(t, s)
	if r.Reason != Watchdog || r.Signal != syscall.SIGTERM {
		t.Fatalf("%+v", r)
	}
	if !strings.HasPrefix(r.String(), "stopped: no output") {
		t.Errorf("String() = %q", r.String())
	}
}

// TestDeadline: a session past its Timeout is stopped, output or not.
func TestDeadline(t *testing.T) {
	t.Parallel()
	clk := fake()
	out := make(lines, 10)
	s := start(t, Spec{Env: []string{helperEnv + "=hang"}, Timeout: time.Minute, Clock: clk, OnLine: out.onLine})
	out.next(t, "ready")
	clk.BlockUntil(1)
	clk.Advance(time.Minute)
	if r := wait(t, s); r.Reason != Deadline || r.Signal != syscall.SIGTERM {
		t.Fatalf("%+v", r)
	}
}

// TestStopKillsAfterGrace: Stop sends SIGTERM; a command that survives it
// gets SIGKILL KillGrace later.
func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	clk := fake()
	out := make(lines, 10)
	s := start(t, Spec{Env: []string{helperEnv + "=ignore-term"}, KillGrace: 10 * time.Second, Clock: clk, OnLine: out.onLine})
	out.next(t, "ready")
	s.Stop()
	out.next(t, "got TERM") // SIGTERM arrived and was survived
	clk.BlockUntil(1)       // the kill timer
	clk.Advance(10 * time.Second)
	r := wait(t, s)
	if r.Reason != Cancelled || r.Signal != syscall.SIGKILL || r.ExitCode != -1 {
		t.Fatalf("%+v", r)
	}
	if r.String() != "stopped: cancelled (killed by SIGKILL)" {
		t.Errorf("String() = %q", r.String())
	}
}

// TestTermInside: with TermInside a stop's SIGTERM reaches what a wrapper
// runs, not the wrapper, which ends cleanly with it; without, the wrapper
// dies of it.
func TestTermInside(t *testing.T) {
	t.Parallel()
	for _, inside := range []bool{true, false} {
		out := make(lines, 10)
		s := start(t, Spec{ID: fmt.Sprintf("wrapped-%v", inside), Env: []string{helperEnv + "=wrapper"}, TermInside: inside, OnLine: out.onLine})
		out.next(t, "ready")
		s.Stop()
		r := wait(t, s)
		if inside && (r.Reason != Cancelled || r.ExitCode != 3 || r.Signal != 0) {
			t.Errorf("inside: %+v, want the wrapped command's exit status 3", r)
		}
		if !inside && r.Signal != syscall.SIGTERM {
			t.Errorf("not inside: %+v, want the wrapper killed by SIGTERM", r)
		}
	}
}

// TestContextCancel: the end of the context stops the session.
func TestContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(lines, 10)
	s, err := Start(ctx, Spec{ID: "ctx", Path: testBinary(t), Env: []string{helperEnv + "=hang"}, OnLine: out.onLine})
	if err != nil {
		t.Fatal(err)
	}
	out.next(t, "ready")
	cancel()
	if r := wait(t, s); r.Reason != Cancelled || r.Signal != syscall.SIGTERM {
		t.Fatalf("%+v", r)
	}
}

// TestFinalGrace: a command that hangs after its final line is stopped
// FinalGrace later; one that exits in time ended by itself.
func TestFinalGrace(t *testing.T) {
	t.Parallel()
	for _, hangs := range []bool{true, false} {
		clk := fake()
		out := make(lines, 10)
		s := start(t, Spec{Env: []string{helperEnv + "=final", fmt.Sprintf("PROC_TEST_HANG=%d", map[bool]int{true: 1}[hangs])},
			FinalGrace: 5 * time.Second, Clock: clk, OnLine: out.onLine})
		out.next(t, `{"type":"result"}`)
		s.Final()
		if !hangs {
			if r := wait(t, s); r.Reason != Exited || r.ExitCode != 0 {
				t.Fatalf("exits: %+v", r)
			}
			continue
		}
		clk.BlockUntil(1)
		clk.Advance(5 * time.Second)
		if r := wait(t, s); r.Reason != FinalGrace || r.Signal != syscall.SIGTERM {
			t.Fatalf("hangs: %+v", r)
		}
	}
}

// running reports whether process pid runs (a zombie does not).
func running(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.state != 'Z' && st.state != 'X'
}

// pidfd opens a handle on process pid, so that a wait for its end cannot
// be fooled by a reused PID.
func pidfd(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// exitedWithin reports whether the process behind fd has exited within d
// (0: now).
func exitedWithin(t *testing.T, fd int, d time.Duration) bool {
	t.Helper()
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(d.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
}

// TestNothingLeftAtExit: when the command exits, what it started is
// killed: in its group, and out of it (its own session) by the marker.
func TestNothingLeftAtExit(t *testing.T) {
	t.Parallel()
	for _, escape := range []string{"0", "1"} {
		out := make(lines, 10)
		s := start(t, Spec{ID: "tree-exit-" + escape, Env: []string{helperEnv + "=tree", "PROC_TEST_EXIT=1", "PROC_TEST_ESCAPE=" + escape}, OnLine: out.onLine})
		var child, grandchild int
		if _, err := fmt.Sscanf(out.next(t, ""), "tree %d %d", &child, &grandchild); err != nil {
			t.Fatal(err)
		}
		r := wait(t, s)
		if r.Reason != Exited || r.ExitCode != 0 {
			t.Fatalf("%+v", r)
		}
		if running(grandchild) {
			t.Errorf("escape=%s: the grandchild %d still runs after the session", escape, grandchild)
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
		}
	}
}

// Find lists a running session's process with its own process group,
// only for its own id, and nothing once the session is over.
func TestFind(t *testing.T) {
	t.Parallel()
	out := make(lines, 10)
	s := start(t, Spec{ID: "find-me", Env: []string{helperEnv + "=hang"}, OnLine: out.onLine})
	out.next(t, "ready")
	if got, want := Find("find-me"), []Process{{PID: s.PID(), PGID: s.PID()}}; !slices.Equal(got, want) {
		t.Errorf("Find(find-me) = %v, want %v", got, want)
	}
	if got := marked("find-me"); !slices.Equal(got, []int{s.PID()}) {
		t.Errorf("marked(find-me) = %v, want [%d]", got, s.PID())
	}
	if got := Find("find-m"); len(got) != 0 {
		t.Errorf("Find(find-m) = %v, want nothing (another session's id)", got)
	}
	s.Stop()
	wait(t, s)
	if got := Find("find-me"); len(got) != 0 {
		t.Errorf("Find after the session = %v, want nothing", got)
	}
}

// TestSweepAfterRunnerKilled: a runner (this test binary) that started a
// session tree is SIGKILLed. The kernel kills the session's command with
// it (Pdeathsig); the grandchild, and a child that cleared its environment
// (no marker: only the process group ties it to the session), survive as
// orphans until Sweep, at the next start, kills them and names them; then
// no process of the session is left.
func TestSweepAfterRunnerKilled(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	runner := exec.Command(testBinary(t))
	runner.Env = append(os.Environ(), helperEnv+"=runner", "PROC_TEST_SESSION=swept-1", "PROC_TEST_STATE="+state, "PROC_TEST_BARE=1")
	stdout, err := runner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	runner.Stderr = os.Stderr
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Process.Kill(); _ = runner.Wait() })
	got := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	var child, grandchild, bare int
	for child == 0 {
		select {
		case l, ok := <-got:
			if !ok {
				t.Fatal("the runner ended early")
			}
			fmt.Sscanf(l, "bare %d", &bare)
			fmt.Sscanf(l, "tree %d %d", &child, &grandchild)
		case <-time.After(hangGuard):
			t.Fatal("the runner did not start its session")
		}
	}
	if bare == 0 {
		t.Fatal("the session's command did not start its unmarked child")
	}
	childFD, grandchildFD, bareFD := pidfd(t, child), pidfd(t, grandchild), pidfd(t, bare)
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL); _ = syscall.Kill(bare, syscall.SIGKILL) })
	if _, err := os.Stat(filepath.Join(state, "swept-1.json")); err != nil {
		t.Fatalf("no record of the session: %v", err)
	}

	if err := runner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = runner.Wait()
	if !exitedWithin(t, childFD, hangGuard) {
		t.Fatal("the session's command outlived its runner (Pdeathsig)")
	}
	if exitedWithin(t, grandchildFD, 0) || exitedWithin(t, bareFD, 0) {
		t.Fatal("the grandchild or the unmarked child died with the runner: nothing left for Sweep to do, the test proves nothing")
	}

	swept, err := Sweep(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0].ID != "swept-1" || !slices.Contains(swept[0].Killed, grandchild) || !slices.Contains(swept[0].Killed, bare) {
		t.Fatalf("swept %+v, want session swept-1 with %d and %d killed", swept, grandchild, bare)
	}
	// Sweep returns once what it killed is gone: checked at once.
	if !exitedWithin(t, grandchildFD, 0) {
		t.Fatal("the grandchild survived Sweep")
	}
	if !exitedWithin(t, bareFD, 0) {
		t.Fatal("the unmarked child in the session's process group survived Sweep")
	}
	if left := marked("swept-1"); len(left) > 0 {
		t.Fatalf("processes of the session left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(state, "swept-1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the record is still there: %v", err)
	}
}

// TestSweepSparesOthers: a record whose runner is alive is left alone; a
// dead runner's record whose process group was reused by an unrelated
// program (no marker) kills nothing.
func TestSweepSparesOthers(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	unrelated := exec.Command(testBinary(t))
	unrelated.Env = append(os.Environ(), helperEnv+"=hang")
	unrelated.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := unrelated.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unrelated.Process.Kill(); _ = unrelated.Wait() })
	pid := unrelated.Process.Pid

	// A live session of this (live) runner, marked.
	live := start(t, Spec{ID: "live-1", Env: []string{helperEnv + "=hang"}, StateDir: state})

	start, err := selfStart()
	if err != nil {
		t.Fatal(err)
	}
	// The dead runner: this PID with another start time, as after a reuse.
	b, _ := json.Marshal(record{ID: "dead-1", PID: pid, PGID: pid, RunnerPID: os.Getpid(), RunnerStart: start + 1})
	if err := os.WriteFile(filepath.Join(state, "dead-1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	swept, err := Sweep(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0].ID != "dead-1" || len(swept[0].Killed) != 0 {
		t.Fatalf("swept %+v, want dead-1 with nothing killed", swept)
	}
	if !running(pid) {
		t.Error("Sweep killed an unrelated process that reused the recorded process group")
	}
	if !running(live.PID()) {
		t.Error("Sweep killed a session of a live runner")
	}
	if _, err := os.Stat(filepath.Join(state, "live-1.json")); err != nil {
		t.Errorf("the live session's record: %v", err)
	}
}

// TestSweepNothing: no state folder, nothing to do.
func TestSweepNothing(t *testing.T) {
	t.Parallel()
	if swept, err := Sweep(filepath.Join(t.TempDir(), "none")); err != nil || swept != nil {
		t.Fatalf("%v, %v", swept, err)
	}
}

// TestStartRefuses: bad ids, environments and commands never start.
func TestStartRefuses(t *testing.T) {
	t.Parallel()
	for _, spec := range []Spec{
		{ID: "", Path: testBinary(t)},
		{ID: "../x", Path: testBinary(t)},
		{ID: "..", Path: testBinary(t)},
		{ID: "ok"},
		{ID: "ok", Path: testBinary(t), Env: []string{"NOEQUALS"}},
		{ID: "ok", Path: filepath.Join(t.TempDir(), "missing")},
		{ID: "ok", Path: testBinary(t), Idle: -1},
	} {
		if s, err := Start(context.Background(), spec); err == nil {
			s.Stop()
			s.Wait()
			t.Errorf("%+v started", spec)
		}
	}
}

// TestNothingLeftAfterAnyEnding: a session whose command started a child
// that cleared its environment (no marker: only its process group ties it
// to the session), a grandchild under it, and a process in a session of
// its own (the marker only) leaves none of them behind, however it ends:
// by itself, cancelled, past its deadline, by the watchdog, by its
// context, or hanging after its final line. A stop's SIGTERM reaches the
// whole process group — the command, the child and the grandchild — so
// that each may end cleanly before the SIGKILL KillGrace later.
func TestNothingLeftAfterAnyEnding(t *testing.T) {
	t.Parallel()
	const grace = 10 * time.Second
	for _, c := range []struct {
		name   string
		spec   Spec
		end    func(s *Session, clk *clock.Fake, cancel context.CancelFunc)
		reason Reason
	}{
		{"exit", Spec{}, func(s *Session, _ *clock.Fake, _ context.CancelFunc) { _ = syscall.Kill(s.PID(), syscall.SIGUSR1) }, Exited},
		{"cancel", Spec{}, func(s *Session, _ *clock.Fake, _ context.CancelFunc) { s.Stop() }, Cancelled},
		{"context", Spec{}, func(_ *Session, _ *clock.Fake, cancel context.CancelFunc) { cancel() }, Cancelled},
		{"deadline", Spec{Timeout: time.Hour}, func(_ *Session, clk *clock.Fake, _ context.CancelFunc) {
			clk.BlockUntil(1)
			clk.Advance(time.Hour)
		}, Deadline},
		{"watchdog", Spec{Idle: time.Hour}, func(_ *Session, clk *clock.Fake, _ context.CancelFunc) {
			clk.BlockUntil(1)
			clk.Advance(time.Hour)
		}, Watchdog},
		{"final", Spec{FinalGrace: time.Minute}, func(s *Session, clk *clock.Fake, _ context.CancelFunc) {
			s.Final()
			clk.BlockUntil(1)
			clk.Advance(time.Minute)
		}, FinalGrace},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := fake()
			out := make(lines, 100)
			spec := c.spec
			spec.ID, spec.Path, spec.Env, spec.Clock, spec.KillGrace, spec.OnLine = "family-"+c.name, testBinary(t),
				[]string{helperEnv + "=family"}, clk, grace, out.onLine
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := Start(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Stop(); wait(t, s) })
			fds := map[string]int{}
			for len(fds) < 4 {
				var name string
				var pid int
				if _, err := fmt.Sscanf(out.next(t, ""), "guard %s %d", &name, &pid); err != nil {
					t.Fatal(err)
				}
				fds[name] = pidfd(t, pid)
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			}
			c.end(s, clk, cancel)
			if c.reason != Exited {
				// SIGTERM to the group: the command, the child and the
				// grandchild say so (the one in its own session is not in
				// the group); then SIGKILL after the grace.
				termed := map[string]bool{}
				for len(termed) < 3 {
					l := out.next(t, "")
					name, ok := strings.CutSuffix(l, " got TERM")
					if !ok || name == "C" {
						t.Fatalf("line %q, want the group's processes to get SIGTERM (got it: %v)", l, termed)
					}
					termed[name] = true
				}
				clk.BlockUntil(1) // the kill timer
				clk.Advance(grace)
			}
			r := wait(t, s)
			if r.Reason != c.reason {
				t.Errorf("%+v, want reason %v", r, c.reason)
			}
			for name, fd := range fds {
				if !exitedWithin(t, fd, hangGuard) {
					t.Errorf("%s outlived the session", name)
				}
			}
			if left := marked(spec.ID); len(left) > 0 {
				t.Errorf("marked processes left: %v", left)
			}
		})
	}
}
