package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/runner/sandbox/sandboxtest"
)

// The test binary is the agent inside the sandbox: run with helperEnv set,
// TestMain runs the mode instead of the tests.
const helperEnv = "SANDBOX_TEST_HELPER"

// hangGuard bounds every wait on a real process: a hang becomes a failure.
// It is no speed limit.
const hangGuard = time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helper(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// probe is one thing the agent tries; its outcome is "ok" or the error.
type probe struct {
	Op   string `json:"op"` // write, read, list, get, kill, umount, caps
	Path string `json:"path"`
}

func helper(mode string) {
	switch mode {
	case "probe": // tries the probes of SANDBOX_TEST_PROBES, prints their outcomes
		var probes []probe
		if err := json.Unmarshal([]byte(os.Getenv("SANDBOX_TEST_PROBES")), &probes); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		out := map[string]string{}
		for _, p := range probes {
			out[p.Op+" "+p.Path] = try(p)
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	case "hang": // says so, then hangs (a hang guard: killed long before)
		fmt.Println("ready")
		time.Sleep(10 * time.Minute)
	case "term": // says ready; on SIGTERM says so and exits 3
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("got TERM")
		os.Exit(3)
	case "racer":
		racer()
	case "parent": // starts the sandboxed command of its arguments (as the hang helper), relays its output, hangs
		cmd := exec.Command(os.Args[1], os.Args[2:]...)
		cmd.Env = append(os.Environ(), helperEnv+"=hang") // the last one counts
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := proc.StartHandshaken(cmd); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_ = cmd.Wait()
		time.Sleep(10 * time.Minute)
	}
}

func try(p probe) string {
	outcome := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	switch p.Op {
	case "write":
		return outcome(os.WriteFile(p.Path, []byte("agent was here"), 0o644))
	case "read":
		b, err := os.ReadFile(p.Path)
		if err == nil && len(b) == 0 {
			return "empty"
		}
		return outcome(err)
	case "list":
		entries, err := os.ReadDir(p.Path)
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return "[" + strings.Join(names, " ") + "]"
	case "get":
		resp, err := http.Get(p.Path)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	case "kill": // signal 0 to a host PID
		pid, _ := strconv.Atoi(p.Path)
		return outcome(syscall.Kill(pid, 0))
	case "umount":
		return outcome(syscall.Unmount(p.Path, syscall.MNT_DETACH))
	case "caps":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err.Error()
		}
		var caps []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "CapBnd:") || strings.HasPrefix(l, "CapPrm:") {
				caps = append(caps, strings.Join(strings.Fields(l), " "))
			}
		}
		return strings.Join(caps, ", ")
	case "env":
		return strings.Join(os.Environ(), " ")
	}
	return "unknown probe"
}

// needBwrap fails the test when bubblewrap is missing or cannot make a
// sandbox here, unless BALLET_SKIP_SANDBOX=1 asks to skip it: the sandbox
// is tested with the real one (.ci/run installs it).
func needBwrap(t *testing.T) {
	t.Helper()
	sandboxtest.Need(t, Sandbox{}.Check)
}

// outsideTmp makes a folder outside /tmp (which every sandbox hides
// anyway): what the sandbox must hide has to be visible without it, or the
// test would prove nothing.
func outsideTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "ballet-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// world is a runner's machine: its working folder with two runs, its config
// and token, its user's home, Core's data folder.
type world struct {
	workdir, config, token, userHome, coreData string
	wsA, homeA, wsB                            string
	sandbox                                    Sandbox
}

func newWorld(t *testing.T) world {
	t.Helper()
	root := outsideTmp(t)
	w := world{
		workdir:  filepath.Join(root, "runner"),
		config:   filepath.Join(root, "etc", "runner.toml"),
		token:    filepath.Join(root, "etc", "runner-token"),
		userHome: filepath.Join(root, "home", "ballet"),
		coreData: filepath.Join(root, "core-data"),
	}
	w.wsA = filepath.Join(w.workdir, "runs", "a", "work")
	w.homeA = filepath.Join(w.workdir, "runs", "a", "home")
	w.wsB = filepath.Join(w.workdir, "runs", "b", "work")
	for _, d := range []string{w.wsA, w.homeA} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(w.wsB, "secret.go"), "run b's code")
	write(t, w.config, "token_file = 'runner-token'")
	write(t, w.token, "ballet_runner_secret")
	write(t, filepath.Join(w.userHome, ".ssh", "id_ed25519"), "PRIVATE KEY")
	write(t, filepath.Join(w.coreData, "core.db"), "every organization's data")
	write(t, filepath.Join(w.workdir, "mirrors", "acme.git", "HEAD"), "ref: refs/heads/main")
	w.sandbox = Sandbox{
		Hide:    []string{w.workdir, w.config, w.token, w.userHome, w.coreData},
		Private: filepath.Join(w.workdir, "sandbox"),
	}
	return w
}

// run runs the test binary as the agent, in sb, and returns its stdout.
func run(t *testing.T, sb Sandbox, w world, mode string, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := sb.Wrap(Session{
		Command:   Command{Path: self, Env: append([]string{helperEnv + "=" + mode, "HOME=" + w.homeA}, env...)},
		Workspace: w.wsA, Home: w.homeA,
		ReadOnly: []string{filepath.Dir(self)}, // the test binary lives under /tmp
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args...)
	c.Env, c.Dir = cmd.Env, cmd.Dir
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err = proc.StartHandshaken(c)
	if err == nil {
		err = c.Wait()
	}
	out := stdout.Bytes()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	return string(out)
}

// TestSandboxConfines: an agent in the sandbox cannot write outside its
// workspace, its home and /tmp, cannot read the runner's config and token,
// another run's workspace, the runner user's home or Core's data, cannot
// unmount what hides them, sees none of the runner's processes, and
// reaches the network. The same probes without Hide prove that each of
// those paths is there to be found.
func TestSandboxConfines(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	w := newWorld(t)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "core answers") }))
	defer srv.Close()

	secrets := []probe{
		{"read", w.config}, {"read", w.token}, {"read", filepath.Join(w.wsB, "secret.go")},
		{"read", filepath.Join(w.userHome, ".ssh", "id_ed25519")}, {"read", filepath.Join(w.coreData, "core.db")},
		{"read", filepath.Join(w.workdir, "mirrors", "acme.git", "HEAD")},
	}
	probes := append([]probe{
		{"write", "/usr/ballet-probe"}, {"write", "/etc/ballet-probe"},
		{"write", filepath.Join(w.workdir, "probe")}, {"write", filepath.Join(w.workdir, "runs", "b", "probe")},
		{"write", filepath.Join(w.userHome, "probe")}, {"write", filepath.Join(w.coreData, "probe")},
		{"write", w.config},
		{"list", filepath.Join(w.workdir, "runs")}, {"list", w.coreData}, {"list", w.workdir},
		{"umount", w.workdir}, {"umount", w.config},
		{"kill", strconv.Itoa(os.Getpid())}, {"list", "/proc/" + strconv.Itoa(os.Getpid())},
		{"caps", ""},
		{"write", filepath.Join(w.wsA, "change.go")}, {"write", filepath.Join(w.homeA, ".config")}, {"write", "/tmp/scratch"},
		{"get", srv.URL},
	}, secrets...)
	js, _ := json.Marshal(probes)

	var got map[string]string
	if err := json.Unmarshal([]byte(run(t, w.sandbox, w, "probe", "SANDBOX_TEST_PROBES="+string(js))), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"write /usr/ballet-probe":                           "read-only file system",
		"write /etc/ballet-probe":                           "read-only file system",
		"write " + filepath.Join(w.workdir, "probe"):        "read-only file system",
		"write " + filepath.Join(w.workdir, "runs/b/probe"): "no such file or directory",
		"write " + filepath.Join(w.userHome, "probe"):       "read-only file system",
		"write " + filepath.Join(w.coreData, "probe"):       "read-only file system",
		"write " + w.config:                                 "read-only file system",
		"list " + filepath.Join(w.workdir, "runs"):          "[a]",
		"list " + w.coreData:                                "[]",
		"umount " + w.workdir:                               "operation not permitted",
		"umount " + w.config:                                "operation not permitted",
		"kill " + strconv.Itoa(os.Getpid()):                 "no such process",
		"list /proc/" + strconv.Itoa(os.Getpid()):           "no such file or directory",
		"caps ": "CapPrm: 0000000000000000, CapEff: 0000000000000000, CapBnd: 0000000000000000",
		"write " + filepath.Join(w.wsA, "change.go"):                "ok",
		"write " + filepath.Join(w.homeA, ".config"):                "ok",
		"write /tmp/scratch":                                        "ok",
		"get " + srv.URL:                                            "core answers",
		"read " + w.config:                                          "permission denied",
		"read " + w.token:                                           "permission denied",
		"read " + filepath.Join(w.wsB, "secret.go"):                 "no such file or directory",
		"read " + filepath.Join(w.userHome, ".ssh/id_ed25519"):      "no such file or directory",
		"read " + filepath.Join(w.coreData, "core.db"):              "no such file or directory",
		"read " + filepath.Join(w.workdir, "mirrors/acme.git/HEAD"): "no such file or directory",
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !strings.Contains(g, v) {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	if l := got["list "+w.workdir]; strings.Contains(l, "mirrors") || strings.Contains(l, "sandbox") {
		t.Errorf("the runner's folder shows %s", l)
	}
	if b, err := os.ReadFile(filepath.Join(w.wsA, "change.go")); err != nil || string(b) != "agent was here" {
		t.Errorf("the workspace write did not reach the host: %q %v", b, err)
	}
	if _, err := os.Stat("/tmp/scratch"); err == nil {
		t.Error("/tmp/scratch reached the host's /tmp")
	}

	// Control: without Hide the same secrets are readable — each probe
	// above had something to find.
	js, _ = json.Marshal(secrets)
	if err := json.Unmarshal([]byte(run(t, Sandbox{}, w, "probe", "SANDBOX_TEST_PROBES="+string(js))), &got); err != nil {
		t.Fatal(err)
	}
	for _, p := range secrets {
		if g := got[p.Op+" "+p.Path]; g != "ok" {
			t.Errorf("control: %s %s: %q, want ok", p.Op, p.Path, g)
		}
	}
}

// TestSandboxEnvironment: the session gets exactly its environment, not the
// runner's, and none of it is on bwrap's command line.
func TestSandboxEnvironment(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	w := newWorld(t)
	cmd, err := w.sandbox.Wrap(Session{Command: Command{Path: "/x", Env: []string{"ANTHROPIC_API_KEY=sk-secret"}}, Workspace: w.wsA, Home: w.homeA})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(cmd.Args, " "), "sk-secret") {
		t.Fatalf("the environment is on the command line: %q", cmd.Args)
	}
	js, _ := json.Marshal([]probe{{"env", ""}})
	var got map[string]string
	if err := json.Unmarshal([]byte(run(t, w.sandbox, w, "probe", "SANDBOX_TEST_PROBES="+string(js), "ANTHROPIC_API_KEY=sk-secret")), &got); err != nil {
		t.Fatal(err)
	}
	env := strings.Fields(got["env "])
	// bwrap adds PWD, the workspace.
	want := []string{helperEnv + "=probe", "HOME=" + w.homeA, "SANDBOX_TEST_PROBES=" + string(js), "ANTHROPIC_API_KEY=sk-secret", "PWD=" + w.wsA}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("environment %q, want %q", env, want)
	}
}

// TestSandboxDiesWithParent: when the process that started bwrap is
// SIGKILLed, every process of the sandbox dies (--die-with-parent), with no
// help from the runner's Pdeathsig.
func TestSandboxDiesWithParent(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	w := newWorld(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf("SANDBOX_TEST_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd, err := w.sandbox.Wrap(Session{
		Command:   Command{Path: self, Env: []string{helperEnv + "=hang", mark}},
		Workspace: w.wsA, Home: w.homeA, ReadOnly: []string{filepath.Dir(self)},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(self, append([]string{cmd.Path}, cmd.Args...)...)
	parent.Env = append(cmd.Env, helperEnv+"=parent")
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ready <- sc.Text()
		}
		close(ready)
	}()
	select {
	case l := <-ready:
		if l != "ready" {
			t.Fatalf("%q", l)
		}
	case <-time.After(hangGuard):
		t.Fatal("the sandboxed command did not start")
	}
	pids := marked(mark)
	if len(pids) < 3 { // the parent, bwrap, bwrap's init in the sandbox, the command (bwrap passes its environment on)
		t.Fatalf("processes with the mark: %v", pids)
	}
	var fds []int
	for _, pid := range pids {
		if pid == parent.Process.Pid {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		fds = append(fds, fd)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for i, fd := range fds {
		if !exited(t, fd, hangGuard) {
			t.Errorf("process %d of the sandbox outlived its parent", pids[i])
		}
	}
}

// marked lists the processes whose environment holds mark.
func marked(mark string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == mark {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func exited(t *testing.T, fd int, d time.Duration) bool {
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

// TestSandboxedSession: a proc session running bwrap: stopping it reaches
// the command inside the sandbox (SIGTERM to the group: it can end
// cleanly), its exit status comes out through bwrap, and nothing of the
// sandbox is left.
func TestSandboxedSession(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	w := newWorld(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("sandboxed-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd, err := w.sandbox.Wrap(Session{
		Command:   Command{Path: self, Env: []string{helperEnv + "=term"}},
		Workspace: w.wsA, Home: w.homeA, ReadOnly: []string{filepath.Dir(self)},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 10)
	if !cmd.Wrapper {
		t.Fatal("bwrap is not marked a wrapper")
	}
	s, err := proc.Start(context.Background(), proc.Spec{ID: id, Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
		TermInside: cmd.Wrapper, Handshake: cmd.Wrapper, OnLine: func(b []byte, _ bool) { lines <- string(b) }})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("%q, want %q", got, want)
			}
		case <-time.After(hangGuard):
			t.Fatalf("no %q", want)
		}
	}
	next("ready")
	inside := marked(proc.Marker(id))
	if len(inside) < 3 { // bwrap, its init in the sandbox, the command
		t.Fatalf("processes of the session: %v", inside)
	}
	s.Stop()
	next("got TERM")
	var r proc.Result
	select {
	case <-s.Done():
		r = s.Wait()
	case <-time.After(hangGuard):
		t.Fatal("the session did not end")
	}
	if r.Reason != proc.Cancelled || r.ExitCode != 3 {
		t.Fatalf("%+v", r)
	}
	if left := marked(proc.Marker(id)); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
