package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary plays every process the tests need (no sleep binary nor
// shell): run with helperEnv=<mode>, TestMain runs the mode instead of the
// tests.
const helperEnv = "PROC_TEST_HELPER"

// hangFor is how long a hanging helper waits: a hang guard, far beyond any
// test, so that a helper nobody kills still goes away.
const hangFor = 10 * time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helper(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func hang() { time.Sleep(hangFor) }

func helper(mode string) {
	switch mode {
	case "print": // prints its arguments as lines, exits with PROC_TEST_EXIT
		for _, a := range os.Args[1:] {
			fmt.Println(a)
		}
		fmt.Fprintln(os.Stderr, "some trouble")
		code := 0
		fmt.Sscan(os.Getenv("PROC_TEST_EXIT"), &code)
		os.Exit(code)
	case "huge": // a 40 MiB line between two short ones
		w := bufio.NewWriter(os.Stdout)
		w.WriteString("before\n")
		w.WriteString(strings.Repeat("x", 40<<20))
		w.WriteString("\nafter\n")
		w.Flush()
	case "env": // what the process was given
		var st, null syscall.Stat_t
		_ = syscall.Fstat(0, &st)
		_ = syscall.Stat(os.DevNull, &null)
		wd, _ := os.Getwd()
		sid, _ := getsid()
		pgid, _ := syscall.Getpgid(0)
		b, _ := json.Marshal(map[string]any{
			"env": os.Environ(), "dir": wd, "pid": os.Getpid(), "pgid": pgid, "sid": sid,
			"stdin_is_devnull": st.Rdev == null.Rdev && st.Mode&syscall.S_IFMT == syscall.S_IFCHR,
		})
		fmt.Println(string(b))
	case "hang": // prints ready, then hangs
		fmt.Println("ready")
		hang()
	case "ignore-term": // survives SIGTERM, saying so
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		for range c {
			fmt.Println("got TERM")
		}
	case "wrapper": // runs the term helper and exits with its status (a wrapper like bwrap: SIGTERM kills it)
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=term")
		c.Stdout = os.Stdout
		_ = c.Run()
		os.Exit(c.ProcessState.ExitCode())
	case "term": // says ready; on SIGTERM says so and exits 3
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("got TERM")
		os.Exit(3)
	case "final": // prints its final line, then exits or hangs (PROC_TEST_HANG)
		fmt.Println(`{"type":"result"}`)
		if os.Getenv("PROC_TEST_HANG") == "1" {
			hang()
		}
	case "echo": // echoes the lines of the FIFO PROC_TEST_FIFO, then hangs
		f, err := os.Open(os.Getenv("PROC_TEST_FIFO"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fmt.Println(sc.Text())
		}
		hang()
	case "tree": // starts a hanging grandchild (its own session with PROC_TEST_ESCAPE; with PROC_TEST_BARE=1 also an unmarked one, "bare PID"), says who is who, then hangs or exits (PROC_TEST_EXIT)
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), helperEnv+"=hang")
		if os.Getenv("PROC_TEST_ESCAPE") == "1" {
			gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if os.Getenv("PROC_TEST_BARE") == "1" { // and a child in the group without the marker (its environment cleared)
			bare := exec.Command(os.Args[0])
			bare.Env = []string{helperEnv + "=hang"}
			if err := bare.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Printf("bare %d\n", bare.Process.Pid)
		}
		fmt.Printf("tree %d %d\n", os.Getpid(), gc.Process.Pid)
		if os.Getenv("PROC_TEST_EXIT") == "1" {
			os.Exit(0)
		}
		hang()
	case "zombie-parent": // starts a child that exits at once and is never reaped (a zombie in this group), says "zombie PID" once it is one, hangs
		c := exec.Command(os.Args[0])
		c.Env = []string{helperEnv + "=print", "GOCOVERDIR=" + os.TempDir()}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var info unix.Siginfo // wait for its exit without reaping it
		for unix.Waitid(unix.P_PID, c.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		fmt.Println("zombie", c.Process.Pid)
		hang()
	case "escape": // starts a hanging grandchild that leaves the session (its own session, no marker) holding stdout, says its PID, exits
		gc := exec.Command(os.Args[0])
		gc.Env = []string{helperEnv + "=hang"}
		gc.Stdout = os.Stdout
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("escaped", gc.Process.Pid)
	case "family": // a session's family: child A (in the group, its environment cleared: no marker) with grandchild B, and C in a session of its own (marked); each says "guard NAME PID" and TERM is survived by all, saying so; exits 0 on SIGUSR1
		usr := make(chan os.Signal, 1)
		signal.Notify(usr, syscall.SIGUSR1)
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		a := exec.Command(os.Args[0])
		a.Env = []string{helperEnv + "=guard", "PROC_TEST_NAME=A", "PROC_TEST_CHILD=B"}
		a.Stdout = os.Stdout
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=guard", "PROC_TEST_NAME=C")
		c.Stdout = os.Stdout
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		for _, p := range []*exec.Cmd{a, c} {
			if err := p.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		fmt.Println("guard leader", os.Getpid())
		for {
			select {
			case <-term:
				fmt.Println("leader got TERM")
			case <-usr:
				os.Exit(0)
			}
		}
	case "guard": // says "guard NAME PID", survives TERM saying "NAME got TERM"; starts PROC_TEST_CHILD as another guard first
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		if child := os.Getenv("PROC_TEST_CHILD"); child != "" {
			g := exec.Command(os.Args[0])
			g.Env = []string{helperEnv + "=guard", "PROC_TEST_NAME=" + child}
			g.Stdout = os.Stdout
			if err := g.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		name := os.Getenv("PROC_TEST_NAME")
		fmt.Println("guard", name, os.Getpid())
		for range term {
			fmt.Println(name, "got TERM")
		}
	case "runner": // a runner: starts session PROC_TEST_SESSION (a tree) recorded in PROC_TEST_STATE, relays its lines, hangs
		s, err := Start(context.Background(), Spec{
			ID: os.Getenv("PROC_TEST_SESSION"), Path: os.Args[0], StateDir: os.Getenv("PROC_TEST_STATE"),
			Env:    []string{helperEnv + "=tree", "PROC_TEST_BARE=" + os.Getenv("PROC_TEST_BARE")},
			OnLine: func(l []byte, _ bool) { fmt.Println(string(l)) },
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("runner", s.PID())
		hang()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		os.Exit(2)
	}
}

func getsid() (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}
