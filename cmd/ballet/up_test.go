package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// upGuard bounds a wait on ballet up: a hang becomes a failure. It is no
// speed limit.
const upGuard = 2 * time.Minute

// upProc is a `ballet up` process whose output lines a test waits for.
type upProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	addr  string
	kaddr string // the Knowledge service's
	dir   string

	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	exited  chan struct{}
	err     error
}

// startUp runs `ballet up` in a fresh folder whose configuration has a
// free port and agent CLIs that do not exist (the runner cannot run
// sessions here: the case ballet up must survive); more is added to it.
func startUp(t *testing.T, more string) *upProc {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	kaddr := freeAddr(t)
	cfg := fmt.Sprintf("[http]\naddr = %q\n[knowledge]\nurl = %q\n[runner]\ndrain = \"2s\"\n[adapters.claude-code]\ncommand = %q\n[adapters.opencode]\ncommand = %q\n%s",
		addr, "http://"+kaddr, filepath.Join(dir, "no-claude"), filepath.Join(dir, "no-opencode"), more)
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "knowledge.toml"), []byte(fmt.Sprintf("[http]\naddr = %q\n", kaddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startUpIn(t, dir, addr, kaddr, nil)
}

// startUpIn runs `ballet up` in dir, on its ballet.toml and
// knowledge.toml (Core on addr, Knowledge on kaddr), with env added to
// the test's environment.
func startUpIn(t *testing.T, dir, addr, kaddr string, env []string) *upProc {
	t.Helper()
	u := &upProc{t: t, addr: addr, kaddr: kaddr, dir: dir, changed: make(chan struct{}), exited: make(chan struct{})}
	u.cmd = exec.Command(binary, "up", "--config", "ballet.toml", "--knowledge-config", "knowledge.toml")
	u.cmd.Dir = dir
	u.cmd.Env = append(os.Environ(), env...)
	stderr, err := u.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	u.cmd.Stdout = u.cmd.Stderr
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			u.mu.Lock()
			u.lines = append(u.lines, sc.Text())
			close(u.changed)
			u.changed = make(chan struct{})
			u.mu.Unlock()
		}
		u.err = u.cmd.Wait()
		close(u.exited)
	}()
	t.Cleanup(func() {
		_ = u.cmd.Process.Kill()
		<-u.exited
		if t.Failed() {
			t.Logf("ballet up printed:\n%s", u.output())
		}
	})
	return u
}

func (u *upProc) output() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.lines, "\n")
}

// line waits for a line matching re and returns its submatches.
func (u *upProc) line(re string) []string {
	u.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(upGuard)
	for i := 0; ; {
		u.mu.Lock()
		for ; i < len(u.lines); i++ {
			if m := rx.FindStringSubmatch(u.lines[i]); m != nil {
				u.mu.Unlock()
				return m
			}
		}
		ch := u.changed
		u.mu.Unlock()
		select {
		case <-ch:
		case <-u.exited:
			u.t.Fatalf("ballet up exited (%v) without printing %q", u.err, re)
		case <-deadline:
			u.t.Fatalf("ballet up did not print %q", re)
		}
	}
}

// nthPid waits for the n-th line (from 1) matching re and returns the
// pid it names (re's first submatch).
func (u *upProc) nthPid(re string, n int) int {
	u.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(upGuard)
	for {
		u.mu.Lock()
		seen := 0
		for _, l := range u.lines {
			if m := rx.FindStringSubmatch(l); m != nil {
				if seen++; seen == n {
					u.mu.Unlock()
					pid, _ := strconv.Atoi(m[1])
					return pid
				}
			}
		}
		ch := u.changed
		u.mu.Unlock()
		select {
		case <-ch:
		case <-u.exited:
			u.t.Fatalf("ballet up exited (%v) before its line %d matching %q", u.err, n, re)
		case <-deadline:
			u.t.Fatalf("ballet up did not print line %d matching %q", n, re)
		}
	}
}

func (u *upProc) wait() error {
	u.t.Helper()
	select {
	case <-u.exited:
		return u.err
	case <-time.After(upGuard):
		u.t.Fatal("ballet up did not exit")
		return nil
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func getJSON(t *testing.T, url, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// `ballet up` starts Core and a runner, with a runner token of its own,
// and is up although the runner cannot run sessions here: the runner says
// why at start, and whatever becomes of it Core keeps serving. SIGTERM
// stops both, with exit status 0; the runner's token is kept (0600, next
// to the bootstrap token) for the next start.
func TestUpStartsCoreAndRunner(t *testing.T) {
	t.Parallel()
	u := startUp(t, "")
	core, _ := strconv.Atoi(u.line(`^ballet up: Core started \(pid (\d+)\)`)[1])
	run, _ := strconv.Atoi(u.line(`^ballet up: runner started \(pid (\d+)\)`)[1])
	know, _ := strconv.Atoi(u.line(`^ballet up: Knowledge service started \(pid (\d+)\)`)[1])
	u.line(`^ballet up: Ballet is up: http://` + regexp.QuoteMeta(u.addr) + `/api/v1`)
	u.line(`^knowledge \| .*knowledge service listening`)
	if st := getJSON(t, "http://"+u.kaddr+"/readyz", "", nil); st != 200 {
		t.Fatalf("the Knowledge service's /readyz: %d", st)
	}
	if _, err := os.Stat(filepath.Join(u.dir, "data", "knowledge.db")); err != nil {
		t.Fatalf("the Knowledge service's own database: %v", err)
	}
	// Core and Knowledge share the credential ballet up made: Core's proxy
	// reaches the service, which checks the bootstrap token with Core.
	boot, err := os.ReadFile(filepath.Join(u.dir, "data", "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+u.addr+"/api/v1/orgs", strings.NewReader(`{"slug":"acme","name":"Acme"}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(boot)))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create an organization: %v %v", resp, err)
	}
	var spaces struct{ Spaces []struct{ Slug string } }
	if st := getJSON(t, "http://"+u.addr+"/api/v1/knowledge/orgs/acme/spaces", strings.TrimSpace(string(boot)), &spaces); st != 200 ||
		len(spaces.Spaces) != 1 || spaces.Spaces[0].Slug != "default" {
		t.Fatalf("the Knowledge service through Core: %d %+v", st, spaces)
	}
	u.line(`^runner \| .*cannot run agent sessions.*no agent CLI found`)
	u.line(`^core \| .*core serving`)
	token, err := os.ReadFile(filepath.Join(u.dir, "data", "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	var tokens struct {
		Tokens []struct {
			Name      string `json:"name"`
			RevokedAt string `json:"revoked_at"`
		} `json:"tokens"`
	}
	if st := getJSON(t, "http://"+u.addr+"/api/v1/tokens?kind=runner", strings.TrimSpace(string(token)), &tokens); st != 200 ||
		len(tokens.Tokens) != 1 || !strings.HasPrefix(tokens.Tokens[0].Name, "ballet up runner on ") {
		t.Fatalf("runner tokens: %d %+v", st, tokens)
	}
	// Registered with its problem (a Core of protocol version 2), or
	// stopped: Core serves on either way.
	u.line(`^runner \| .*(registered with Core|the runner stopped)|^ballet up: the runner stopped`)
	if st := getJSON(t, "http://"+u.addr+"/healthz", "", nil); st != 200 {
		t.Fatalf("/healthz: %d", st)
	}
	if err := u.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := u.wait(); err != nil {
		t.Errorf("ballet up after SIGTERM: %v", err)
	}
	for name, pid := range map[string]int{"Core": core, "the runner": run, "the Knowledge service": know} {
		if alive(pid) {
			t.Errorf("%s (pid %d) outlived ballet up", name, pid)
		}
	}
	kept, err := os.Stat(filepath.Join(u.dir, "data", "up-runner-token"))
	if err != nil || kept.Mode().Perm() != 0o600 {
		t.Errorf("the kept runner token: %v %v", kept, err)
	}
}

// Core killed (kill -9) is started again at once, on the same address,
// while the runner goes on; the runner killed is started again too. Core
// exiting by itself (SIGTERM sent to it, not to ballet up) stops ballet
// up, the runner and the Knowledge service with it.
func TestUpRestartsAKilledChild(t *testing.T) {
	t.Parallel()
	u := startUp(t, "")
	core, _ := strconv.Atoi(u.line(`^ballet up: Core started \(pid (\d+)\)`)[1])
	run, _ := strconv.Atoi(u.line(`^ballet up: runner started \(pid (\d+)\)`)[1])
	u.line(`^ballet up: Ballet is up`)
	killed := time.Now()
	if err := syscall.Kill(core, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.line(`^ballet up: Core stopped \(signal: killed\); starting it again`)
	noticed := time.Since(killed)
	u.line(`^ballet up: Core is back`)
	back := time.Since(killed)
	core2 := u.nthPid(`^ballet up: Core started \(pid (\d+)\)`, 2)
	if core2 == core || !alive(core2) || !alive(run) {
		t.Fatalf("after kill -9 of Core (%d): Core %d alive %v, the runner %d alive %v", core, core2, alive(core2), run, alive(run))
	}
	if st := getJSON(t, "http://"+u.addr+"/readyz", "", nil); st != 200 {
		t.Fatalf("/readyz of the new Core: %d", st)
	}
	t.Logf("Core killed: noticed after %s, serving again after %s", noticed.Round(time.Millisecond), back.Round(time.Millisecond))
	if err := syscall.Kill(run, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.line(`^ballet up: the runner stopped \(signal: killed\); starting it again`)
	run2 := u.nthPid(`^ballet up: runner started \(pid (\d+)\)`, 2)
	if run2 == run || !alive(run2) {
		t.Fatalf("the runner was not started again (pid %d, alive %v)", run2, alive(run2))
	}
	// Core stopped by someone else than ballet up: up stops.
	if err := syscall.Kill(core2, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	u.line(`^ballet up: Core stopped \(exit status 0\); stopping the runner and the Knowledge service`)
	if err := u.wait(); err != nil {
		t.Errorf("ballet up after Core stopped cleanly: %v", err)
	}
	for _, name := range []string{"runner", "Knowledge service"} {
		for _, m := range regexp.MustCompile(name+` started \(pid (\d+)\)`).FindAllStringSubmatch(u.output(), -1) {
			if pid, _ := strconv.Atoi(m[1]); alive(pid) {
				t.Errorf("the %s (pid %d) outlived ballet up", name, pid)
			}
		}
	}
}

// ballet up needs Core at a known port.
func TestUpRefusesPortZero(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte("[http]\naddr = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "up", "--config", "ballet.toml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "http.addr: the port must be fixed") {
		t.Errorf("%v: %s", err, out)
	}
}

// ballet runner refuses to start without an agent CLI or a token, saying
// how to fix it; a bad [runner] key is a configuration error naming it.
func TestRunnerRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := fmt.Sprintf("[runner]\nserver = \"http://127.0.0.1:1\"\nworkdir = %q\n[adapters.claude-code]\ncommand = %q\n[adapters.opencode]\ncommand = %q\n",
		filepath.Join(dir, "runner"), filepath.Join(dir, "no-claude"), filepath.Join(dir, "no-opencode"))
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.toml"), []byte("[runner]\nsessions = 0\nsandbox = \"docker\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		args  []string
		env   []string
		code  int
		wants []string
	}{
		{"no CLI", []string{"--config", "ballet.toml"}, []string{"BALLET_RUNNER_TOKEN=ballet_test"}, 1,
			[]string{"cannot run agent sessions: no agent CLI found", "no-claude", "[adapters.<name>] command"}},
		{"no token", []string{"--config", "ballet.toml"}, nil, 1, []string{"no runner token: set [runner] token or BALLET_RUNNER_TOKEN"}},
		{"bad config", []string{"--config", "bad.toml"}, nil, 2, []string{"runner.sessions: 0 is outside 1 … 64", `runner.sandbox: "docker" is not bwrap or none`}},
		{"bad server", []string{"--config", "ballet.toml", "--server", "ftp://x"}, nil, 2, []string{`runner.server: "ftp://x" is not an http(s) URL`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"runner"}, c.args...)...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), c.env...)
			if c.env == nil {
				cmd.Env = append(os.Environ(), "BALLET_RUNNER_TOKEN=")
			}
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != c.code {
				t.Errorf("exit %v, want %d\n%s", err, c.code, out)
			}
			for _, w := range c.wants {
				if !strings.Contains(string(out), w) {
					t.Errorf("the output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// upConfig writes ballet.toml and knowledge.toml into a fresh folder, with
// Core on addr and Knowledge on kaddr, and returns the folder.
func upConfig(t *testing.T, addr, kaddr, kmore string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("[http]\naddr = %q\n[knowledge]\nurl = %q\n[runner]\ndrain = \"2s\"\n[adapters.claude-code]\ncommand = %q\n[adapters.opencode]\ncommand = %q\n",
		addr, "http://"+kaddr, filepath.Join(dir, "no-claude"), filepath.Join(dir, "no-opencode"))
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "knowledge.toml"), []byte(fmt.Sprintf("[http]\naddr = %q\n%s", kaddr, kmore)), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runUpToEnd runs ballet up in dir until it exits by itself (a hang guard
// kills it) and returns its exit code and output.
func runUpToEnd(t *testing.T, dir string, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, "up", "--config", "ballet.toml", "--knowledge-config", "knowledge.toml")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(upGuard):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("ballet up did not exit by itself:\n%s", out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// A port ballet up will use that another process holds (a first ballet up,
// a fake model on Knowledge's port), or a model URL on one of its ports,
// is refused before anything starts or is written: exit 1, the port and
// the key that moves it named, no "Ballet is up", no bootstrap token.
func TestUpRefusesAPortClashBeforeAnything(t *testing.T) {
	t.Parallel()
	hold := func(t *testing.T) (string, func()) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l.Addr().String(), func() { l.Close() }
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T) (dir string, env []string)
		wants []string
	}{
		{"Core's port taken", func(t *testing.T) (string, []string) {
			busy, release := hold(t)
			t.Cleanup(release)
			return upConfig(t, busy, freeAddr(t), ""), nil
		}, []string{"(Core,", "already in use", "[http] addr in ballet.toml"}},
		{"Knowledge's port taken", func(t *testing.T) (string, []string) {
			busy, release := hold(t)
			t.Cleanup(release)
			return upConfig(t, freeAddr(t), busy, ""), nil
		}, []string{"(the Knowledge service,", "already in use", "[http] addr in knowledge.toml"}},
		{"the model URL on Knowledge's port", func(t *testing.T) (string, []string) {
			k := freeAddr(t)
			return upConfig(t, freeAddr(t), k, ""), []string{"ANTHROPIC_BASE_URL=http://" + k}
		}, []string{"ANTHROPIC_BASE_URL (http://", "which the Knowledge service will listen on", "[http] addr in knowledge.toml"}},
		{"Core and Knowledge on one port", func(t *testing.T) (string, []string) {
			a := freeAddr(t)
			return upConfig(t, a, a, ""), nil
		}, []string{"Core and the Knowledge service are both configured on port"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, env := c.setup(t)
			code, out := runUpToEnd(t, dir, env...)
			if code != 1 {
				t.Errorf("exit %d, want 1:\n%s", code, out)
			}
			for _, w := range append(c.wants, "ballet up: refusing to start: ") {
				if !strings.Contains(out, w) {
					t.Errorf("the output lacks %q:\n%s", w, out)
				}
			}
			for _, no := range []string{"Ballet is up", "Core started"} {
				if strings.Contains(out, no) {
					t.Errorf("the output has %q:\n%s", no, out)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
				t.Errorf("ballet up wrote into the folder (data: %v) though it refused to start", err)
			}
		})
	}
}

// A child that dies at start stops ballet up before "Ballet is up", with
// the child's own words (here the Knowledge service, whose database
// cannot be opened), and nothing outlives it.
func TestUpReportsAChildDyingAtStart(t *testing.T) {
	t.Parallel()
	dir := upConfig(t, freeAddr(t), freeAddr(t), "[storage]\npath = \"/proc/no-such/knowledge.db\"\n")
	code, out := runUpToEnd(t, dir)
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	if strings.Contains(out, "Ballet is up") {
		t.Errorf("Ballet is up though the Knowledge service died:\n%s", out)
	}
	if !regexp.MustCompile(`ballet up: the Knowledge service stopped before it was ready \(exit status 1; its last words: .*knowledge\.db`).MatchString(out) {
		t.Errorf("the Knowledge service's death is not reported with its cause:\n%s", out)
	}
	for _, name := range []string{"Core", "runner", "Knowledge service"} {
		if m := regexp.MustCompile(name + ` started \(pid (\d+)\)`).FindStringSubmatch(out); m != nil {
			if pid, _ := strconv.Atoi(m[1]); alive(pid) {
				t.Errorf("the %s (pid %d) outlived ballet up", name, pid)
			}
		}
	}
}

// A second ballet up in another folder, on the ports of one that is up,
// fails first: exit 1 with the busy port and the key that moves it named,
// no child started (so no runner blaming its sandbox), nothing written
// into its folder (no bootstrap token), and the first one unharmed.
func TestUpSecondInAnotherFolderFailsFirst(t *testing.T) {
	t.Parallel()
	first := startUp(t, "")
	first.line(`^ballet up: Ballet is up`)
	dir := upConfig(t, first.addr, first.kaddr, "")
	code, out := runUpToEnd(t, dir)
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	_, port, _ := net.SplitHostPort(first.addr)
	for _, w := range []string{"ballet up: refusing to start: port " + port + " (Core, " + first.addr + ") is already in use", "[http] addr in ballet.toml"} {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q:\n%s", w, out)
		}
	}
	for _, no := range []string{"Ballet is up", "started (pid", "runner |", "bubblewrap", "bwrap"} {
		if strings.Contains(out, no) {
			t.Errorf("the output has %q:\n%s", no, out)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "ballet.toml" && e.Name() != "knowledge.toml" {
			t.Errorf("ballet up wrote %s into its folder though it refused to start", e.Name())
		}
	}
	if st := getJSON(t, "http://"+first.addr+"/readyz", "", nil); st != 200 {
		t.Errorf("the first ballet up's Core after the second's attempt: /readyz %d", st)
	}
}
