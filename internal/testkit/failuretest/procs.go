package failuretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// errDown says that the process a call needs is not running (it was killed
// and the harness has not restarted it yet).
var errDown = errors.New("core is down")

// coreProc is a real `ballet serve` process that the harness kills with
// SIGKILL (or that kills itself at an armed fault point) and restarts on the
// same address and database.
type coreProc struct {
	bin, dir, config, addr string
	env                    []string // added to Core's environment
	logPath                string
	log                    *os.File

	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	fault     string // BALLET_FAULT of the running process
	started   time.Time
	starts    int
	exit      *os.ProcessState // how the last process ended
	downSince time.Time        // when Core last died, until it is ready again
	outages   []outage         // from each death to the next ready Core
}

// outage is a time when a process the runs depend on was down: Core, the
// runner or the rqlite leader.
type outage struct {
	What     string
	From, To time.Time // To is zero while it lasts
}

// overlaps reports whether the outage overlapped [from, to].
func (o outage) overlaps(from, to time.Time) bool {
	return !o.From.After(to) && (o.To.IsZero() || !o.To.Before(from))
}

// hangGuard bounds a wait for a process that was told to exit: it guards
// against a hang, it is not a speed claim.
const hangGuard = 2 * time.Minute

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func newCoreProc(bin, dir, storage string, env []string) (*coreProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c := &coreProc{bin: bin, dir: dir, env: env, addr: addr, config: filepath.Join(dir, "ballet.toml"), logPath: filepath.Join(dir, "core.log")}
	cfg := fmt.Sprintf(`%s
[http]
addr = %q
[jobs]
lease = "15s"
poll = "50ms"
[leader]
ttl = "2s"
renew = "500ms"
[runs]
grace = "3s"
[reconciler]
interval = "2s"
[auth]
bootstrap_token = %q
[secrets]
allow = [%q] # every test Core's (apitest); the Gitea project's credentials_ref is one (giteaCredEnv)
`, storage, c.addr, AdminToken, apitest.SecretsAllow)
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if c.log, err = os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

// start starts Core with the fault point armed (none when empty) and waits
// until it answers /readyz — or until it died, which an early fault point
// can do; the caller sees that with dead.
func (c *coreProc) start(faultSpec string) error {
	c.mu.Lock()
	c.starts++
	fmt.Fprintf(c.log, "\n=== start %d at %s, %s=%q ===\n", c.starts, time.Now().Format("15:04:05.000"), fault.EnvVar, faultSpec)
	cmd := exec.Command(c.bin, "serve", "--config", c.config)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.Env = append(append(os.Environ(), c.env...), fault.EnvVar+"="+faultSpec)
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		c.mu.Lock()
		c.exit = cmd.ProcessState
		if c.downSince.IsZero() {
			c.downSince = time.Now()
		}
		c.mu.Unlock()
		close(exited)
	}()
	c.cmd, c.exited, c.fault, c.started, c.exit = cmd, exited, faultSpec, time.Now(), nil
	c.mu.Unlock()
	deadline := time.Now().Add(hangGuard)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-exited:
			return nil
		default:
		}
		resp, err := hc.Get("http://" + c.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				c.mu.Lock()
				if !c.downSince.IsZero() {
					c.outages = append(c.outages, outage{What: "core", From: c.downSince, To: time.Now()})
					c.downSince = time.Time{}
				}
				c.mu.Unlock()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("core was not ready after %s (hang guard; see %s)", hangGuard, c.logPath)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// dead reports whether the process has exited.
func (c *coreProc) dead() bool {
	c.mu.Lock()
	ch := c.exited
	c.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// killed reports whether the exited process died of SIGKILL (a fault
// point, or the harness), and else how it exited.
func (c *coreProc) killed() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exit == nil {
		return false, "still running"
	}
	if ws, ok := c.exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, c.exit.String()
	}
	return false, c.exit.String()
}

func (c *coreProc) armed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fault
}

func (c *coreProc) since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.started)
}

// coreOutages returns Core's outages (the last one open while Core is down).
func (c *coreProc) coreOutages() []outage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]outage(nil), c.outages...)
	if !c.downSince.IsZero() {
		out = append(out, outage{What: "core", From: c.downSince})
	}
	return out
}

// signal sends sig and waits for the process to exit; one that is still
// there after wait is killed.
func (c *coreProc) signal(sig syscall.Signal, wait time.Duration) error {
	c.mu.Lock()
	cmd, ch := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-ch:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
	}
	select {
	case <-ch:
		return nil
	case <-time.After(hangGuard):
		return fmt.Errorf("core (pid %d) did not exit after SIGKILL within %s (hang guard)", cmd.Process.Pid, hangGuard)
	}
}

func (c *coreProc) kill() error { return c.signal(syscall.SIGKILL, hangGuard) }

// stop stops Core cleanly: its handlers get their shutdown grace.
func (c *coreProc) stop() error { return c.signal(syscall.SIGTERM, time.Minute) }

// runnerProc is the test runner: this test binary re-executed in runner
// mode (RunnerMain). Its stdout has one line per action; the harness counts
// the runs it has leased and not finished, so that it kills it mid-run.
type runnerProc struct {
	self    string // the test binary
	env     []string
	logPath string
	log     *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	inflight map[string]bool // runs leased and not finished, by id, from the runner's log
	kills    []runnerKill
	outages  []outage
	starts   int
}

// runnerKill records a kill of the runner and the runs it had in flight.
type runnerKill struct {
	At   time.Time
	Runs []string
}

// runOf returns the run id of a runner log line ("" when it names none).
func runOf(fields []string) string {
	for _, f := range fields {
		if id, ok := strings.CutPrefix(f, "run="); ok {
			return id
		}
	}
	return ""
}

func (r *runnerProc) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	fmt.Fprintf(r.log, "=== runner start %d at %s ===\n", r.starts, time.Now().Format("15:04:05.000"))
	cmd := exec.Command(r.self, "-test.run=^$")
	cmd.Env = append(os.Environ(), r.env...)
	r.inflight = map[string]bool{}
	if n := len(r.outages); n > 0 && r.outages[n-1].To.IsZero() {
		r.outages[n-1].To = time.Now()
	}
	w := &lineWriter{fn: func(line string) {
		fmt.Fprintln(r.log, line)
		fields := strings.Fields(line) // time, action, …
		if len(fields) < 2 {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if cmd != r.cmd { // a line of a killed runner, read late
			return
		}
		switch fields[1] {
		case "lease":
			r.inflight[runOf(fields)] = true
		case "done", "gone", "cancelled":
			delete(r.inflight, runOf(fields))
		}
	}}
	cmd.Stdout = w
	cmd.Stderr = r.log
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	return nil
}

func (r *runnerProc) dead() bool {
	r.mu.Lock()
	ch := r.exited
	r.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// inflightRuns counts the runs the runner has leased and not finished.
func (r *runnerProc) inflightRuns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// kill kills the runner with SIGKILL, recording the runs it had in flight
// and the start of its outage.
func (r *runnerProc) kill() error {
	r.mu.Lock()
	cmd, ch := r.cmd, r.exited
	if cmd != nil {
		k := runnerKill{At: time.Now()}
		for id := range r.inflight {
			k.Runs = append(k.Runs, id)
		}
		sort.Strings(k.Runs)
		r.kills = append(r.kills, k)
		r.outages = append(r.outages, outage{What: "runner", From: k.At})
		r.inflight = map[string]bool{}
	}
	r.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-ch:
		return nil
	case <-time.After(hangGuard):
		return fmt.Errorf("the runner (pid %d) did not exit after SIGKILL within %s (hang guard)", cmd.Process.Pid, hangGuard)
	}
}

// record returns the runner's kills and outages.
func (r *runnerProc) record() ([]runnerKill, []outage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runnerKill(nil), r.kills...), append([]outage(nil), r.outages...)
}

// lineWriter calls fn with every complete line written to it, prefixed
// with the time.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.fn(time.Now().Format("15:04:05.000") + " " + line)
	}
}

// client calls Core's REST API.
type client struct {
	base string
	hc   *http.Client
}

func newClient(addr string) *client {
	return &client{base: "http://" + addr, hc: &http.Client{Timeout: 15 * time.Second}}
}

// once makes one request.
func (c *client) once(token, method, path string, body any) (int, []byte, error) {
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, payload)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// call retries transport errors and 5xx answers (Core restarting, the rqlite
// leader changing) until within has passed, or at once when alive says the
// process is gone.
func (c *client) call(alive func() bool, within time.Duration, token, method, path string, body any) (int, []byte, error) {
	deadline := time.Now().Add(within)
	wait := 20 * time.Millisecond
	for {
		status, b, err := c.once(token, method, path, body)
		if err == nil && status < 500 {
			return status, b, nil
		}
		if err == nil {
			err = fmt.Errorf("%s %s: %d %s", method, path, status, b)
		}
		if alive != nil && !alive() {
			return 0, nil, errors.Join(errDown, err)
		}
		if time.Now().After(deadline) {
			return status, b, err
		}
		time.Sleep(wait)
		wait = min(wait*2, 500*time.Millisecond)
	}
}

// gitOut runs git in dir and returns its trimmed output.
func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func gitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=runner", "GIT_AUTHOR_EMAIL=runner@example.com",
		"GIT_COMMITTER_NAME=runner", "GIT_COMMITTER_EMAIL=runner@example.com", "GIT_TERMINAL_PROMPT=0")
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
