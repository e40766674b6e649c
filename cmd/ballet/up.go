package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/outbound"
	"github.com/ballet/ballet/internal/procgroup"
)

const upHelp = `Usage: ballet up [--config FILE] [--knowledge-config FILE]

Starts a whole Ballet on this machine: Core ('ballet serve'), a local
runner ('ballet runner') and the Knowledge service ('ballet knowledge', with
its own configuration --knowledge-config, or its defaults: data/knowledge.db,
127.0.0.1:8090) as child processes, from one configuration (FILE, or the
defaults). Core and Knowledge share a service credential: [knowledge]
service_token or BALLET_KNOWLEDGE_TOKEN, else one generated for this run. It creates a runner token for the runner with the
platform-admin bootstrap token, and prints where that token is.

Before it starts or writes anything it checks every port it will use
(Core's [http] addr, the Knowledge service's [http] addr) and the model
URLs in its environment (ANTHROPIC_BASE_URL, OPENAI_BASE_URL): a port that
is taken, or a model URL on one of those ports, is refused with the port and
the key that moves it. It prints "Ballet is up" once every child answered:
Core and Knowledge their /readyz, the runner its registration with Core. A
child that stops before that stops ballet up, with the child's exit and
last line.

The runner's lines are prefixed "runner |", Core's "core |". Ballet is up
even when the runner cannot run sessions (no agent CLI, no bubblewrap): the
runner then says why at start, registers with Core to show it, and leases
nothing; if it stops later, Core keeps running.

SIGINT or SIGTERM stops both: the runner first (it drains its sessions for
[runner] drain; a second signal stops them at once; either way they end
interrupted and run again at the next start), then Core. The runner's
token is kept in up-runner-token next to the bootstrap token: started
again, the runner is the same runner.

Core or the runner killed by a signal ballet up did not send (kill -9, the
OOM killer, a crash) is started again at once, at most 5 times in 10
minutes: while Core restarts the runner's sessions go on, retrying their
calls until Core answers; a runner started again is the same runner, and
Core ends at once the runs its predecessor held (interrupted, run again).
When Core exits by itself, or dies once more than that, the runner is
stopped too and ballet up exits. 'ballet serve' and 'ballet runner' remain
for real deployments.

Exit status: 0 after a stop, 1 when a port clashes, a child cannot start
or Core fails, 2 for a usage or configuration error.
`

// upReady bounds the wait for Core's first /readyz.
const upReady = 2 * time.Minute

func upCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("up", stderr)
	path := fs.String("config", "", "TOML configuration `FILE` (optional: every key has a default)")
	kpath := fs.String("knowledge-config", "", "the Knowledge service's TOML configuration `FILE` (optional)")
	if code, done := parseFlags(fs, args, upHelp, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet up: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return 2
	}
	host, port, _ := net.SplitHostPort(cfg.HTTP.Addr)
	if port == "0" {
		fmt.Fprintln(stderr, "ballet up: http.addr: the port must be fixed (not 0): the runner needs to know where Core is")
		return 2
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	base := "http://" + net.JoinHostPort(host, port)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		return 1
	}
	// The service credential Core and Knowledge share: configured, or made
	// for this run; handed to both in their environment, never printed.
	serviceToken, err := cfg.KnowledgeToken(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		return 2
	}
	kcfg, err := config.LoadKnowledge(*kpath)
	if err != nil {
		fmt.Fprintln(stderr, "ballet up: the Knowledge service's configuration:", err)
		return 2
	}
	// Every port is checked before anything starts or is written (the
	// bootstrap token included): a clash is refused, naming the port and
	// the key that moves it.
	if err := checkPorts(upPorts(cfg, kcfg, *path, *kpath), map[string]string{
		"ANTHROPIC_BASE_URL": os.Getenv("ANTHROPIC_BASE_URL"), "OPENAI_BASE_URL": os.Getenv("OPENAI_BASE_URL"),
		"[adapters.opencode] base_url": cfg.Adapters.OpenCode.BaseURL,
	}); err != nil {
		fmt.Fprintln(stderr, "ballet up: refusing to start:", err)
		return 1
	}
	if serviceToken == "" {
		b := make([]byte, 32)
		rand.Read(b) // never fails (crypto/rand, Go 1.24+)
		serviceToken = hex.EncodeToString(b)
	}
	// Core must find the service where it listens.
	if want := "http://" + kcfg.HTTP.Addr; strings.TrimRight(cfg.Knowledge.URL, "/") != want {
		fmt.Fprintf(stderr, "ballet up: warning: Core's [knowledge] url is %s but the Knowledge service listens on %s: set [knowledge] url = %q in %s for Core to reach it\n",
			cfg.Knowledge.URL, kcfg.HTTP.Addr, want, cmp.Or(*path, "Core's configuration"))
	}
	out := &prefixer{w: stderr}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)

	var configArgs []string
	if *path != "" {
		configArgs = []string{"--config", *path}
	}
	childEnv := append(os.Environ(), config.KnowledgeEnvToken+"="+serviceToken)
	core, err := startChild(self, append([]string{"serve"}, configArgs...), childEnv, out.prefix("core | "))
	if err != nil {
		fmt.Fprintln(stderr, "ballet up: starting Core:", err)
		return 1
	}
	fmt.Fprintf(stderr, "ballet up: Core started (pid %d) on %s\n", core.cmd.Process.Pid, base)
	ctx, cancel := context.WithTimeout(context.Background(), upReady)
	defer cancel()
	err = waitHealthy(ctx, "Core", core, sig, func() (bool, error) { return answers(base + "/readyz"), nil })
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		core.stop()
		return 1
	}
	// The bootstrap token, by Core's own rule: the one Core wrote or read.
	tokenFile := cfg.BootstrapTokenPath()
	bootstrap, _, err := auth.Bootstrap(cfg.Auth.BootstrapToken, tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		core.stop()
		return 1
	}
	api := &upAPI{base: base, token: bootstrap}
	var run, know *child
	var tokenID string
	// fail stops what started, in order, and revokes the runner's token.
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "ballet up: "+format+"; stopping\n", args...)
		if run != nil {
			run.stop()
		}
		if tokenID != "" {
			_ = api.revoke(tokenID)
		}
		if know != nil {
			know.stop()
		}
		core.stop()
		return 1
	}
	runnerToken, tokenID, err := api.keptRunnerToken(filepath.Join(filepath.Dir(tokenFile), upRunnerTokenFile))
	if err != nil {
		return fail("creating the runner's token: %v", err)
	}
	env := append(os.Environ(), EnvRunnerToken+"="+runnerToken)
	run, err = startChild(self, append(append([]string{"runner"}, configArgs...), "--server", base, "--keep-going"), env, out.prefix("runner | "))
	if err != nil {
		return fail("starting the runner: %v", err)
	}
	fmt.Fprintf(stderr, "ballet up: runner started (pid %d)\n", run.cmd.Process.Pid)
	kargs := []string{"knowledge", "--core", base}
	if *kpath != "" {
		kargs = append(kargs, "--config", *kpath)
	}
	know, err = startChild(self, kargs, childEnv, out.prefix("knowledge | "))
	if err != nil {
		return fail("starting the Knowledge service: %v", err)
	}
	fmt.Fprintf(stderr, "ballet up: Knowledge service started (pid %d)\n", know.cmd.Process.Pid)
	// Ballet is up once every child answered: Knowledge its /readyz, the
	// runner its registration with Core (with or without a problem).
	if err := waitHealthy(ctx, "the Knowledge service", know, sig, func() (bool, error) {
		return answers("http://" + kcfg.HTTP.Addr + "/readyz"), nil
	}); err != nil {
		return fail("%v", err)
	}
	if err := waitHealthy(ctx, "the runner", run, sig, func() (bool, error) { return api.registered(tokenID) }); err != nil {
		return fail("%v", err)
	}
	knowDone := know.done
	stopKnowledge := func() { know.stop() }
	fmt.Fprintf(stderr, "ballet up: Ballet is up: %s/api/v1 (bootstrap token in %s). Ctrl-C stops it.\n", base, tokenFile)

	runnerDone := run.done
	coreRestarts, runnerRestarts := &restarts{}, &restarts{}
	for {
		select {
		case <-knowDone:
			knowDone = nil
			fmt.Fprintf(stderr, "ballet up: the Knowledge service stopped (%s); Core keeps running\n", know.state())
		case <-runnerDone:
			runnerDone = nil
			if !run.crashed() || !runnerRestarts.allow(time.Now()) {
				fmt.Fprintf(stderr, "ballet up: the runner stopped (%s); Core keeps running\n", run.state())
				continue
			}
			// A runner killed is started again at once: with the same token
			// it is the same runner, and Core ends the runs it held
			// (interrupted, runner_restart) instead of waiting for the grace.
			fmt.Fprintf(stderr, "ballet up: the runner stopped (%s); starting it again\n", run.state())
			if run, err = startChild(self, append(append([]string{"runner"}, configArgs...), "--server", base, "--keep-going"), env, out.prefix("runner | ")); err != nil {
				return fail("starting the runner again: %v", err)
			}
			fmt.Fprintf(stderr, "ballet up: runner started (pid %d)\n", run.cmd.Process.Pid)
			runnerDone = run.done
		case <-core.done:
			if !core.crashed() || !coreRestarts.allow(time.Now()) {
				fmt.Fprintf(stderr, "ballet up: Core stopped (%s); stopping the runner and the Knowledge service\n", core.state())
				run.stop()
				stopKnowledge()
				return core.exitCode()
			}
			// A Core that died (killed, crashed) is started again at once;
			// the runner and its sessions go on meanwhile, retrying their
			// calls until Core answers again.
			fmt.Fprintf(stderr, "ballet up: Core stopped (%s); starting it again (the runner's sessions go on)\n", core.state())
			if core, err = startChild(self, append([]string{"serve"}, configArgs...), childEnv, out.prefix("core | ")); err != nil {
				return fail("starting Core again: %v", err)
			}
			fmt.Fprintf(stderr, "ballet up: Core started (pid %d) on %s\n", core.cmd.Process.Pid, base)
			ctx, cancel := context.WithTimeout(context.Background(), upReady)
			err = waitHealthy(ctx, "Core", core, sig, func() (bool, error) { return answers(base + "/readyz"), nil })
			cancel()
			if err != nil {
				return fail("%v", err)
			}
			fmt.Fprintf(stderr, "ballet up: Core is back: %s/api/v1\n", base)
		case <-sig:
			fmt.Fprintln(stderr, "ballet up: stopping the runner, then the Knowledge service and Core (a second signal stops the runner's sessions at once)")
			go func() {
				if _, ok := <-sig; ok {
					run.signal(syscall.SIGTERM)
				}
			}()
			run.stop() // its token is kept for the next start: the same runner
			stopKnowledge()
			return core.stop()
		}
	}
}

// restarts bounds how often ballet up starts a dead child again: at most
// upRestarts times in upRestartWindow (a child that dies at every start
// stops ballet up instead of looping).
type restarts struct{ at []time.Time }

const (
	upRestarts      = 5
	upRestartWindow = 10 * time.Minute
)

// allow records a restart at now when fewer than upRestarts happened in
// the window before it.
func (r *restarts) allow(now time.Time) bool {
	kept := r.at[:0]
	for _, t := range r.at {
		if now.Sub(t) < upRestartWindow {
			kept = append(kept, t)
		}
	}
	r.at = kept
	if len(r.at) >= upRestarts {
		return false
	}
	r.at = append(r.at, now)
	return true
}

// child is a process ballet up started.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited and its output is read
	err  error
	out  sync.WaitGroup
	// stopping: ballet up sent it SIGTERM to stop it.
	stopping atomic.Bool

	mu   sync.Mutex
	last string // its last line of output: why it stopped, when it says
}

// startChild starts self with args in its own process group (a terminal's
// Ctrl-C reaches ballet up only, which stops the children in order); it
// gets SIGTERM when ballet up dies. Its output goes to w line by line.
func startChild(self string, args, env []string, w io.Writer) (*child, error) {
	cmd := exec.Command(self, args...)
	cmd.Env = env
	procgroup.Own(cmd, syscall.SIGTERM)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	for _, r := range []io.Reader{stdout, stderr} {
		c.out.Add(1)
		go func() {
			defer c.out.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				_, _ = w.Write(append(sc.Bytes(), '\n'))
				if line := strings.TrimSpace(sc.Text()); line != "" {
					c.mu.Lock()
					c.last = line
					c.mu.Unlock()
				}
			}
		}()
	}
	go func() {
		c.out.Wait()
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) signal(s syscall.Signal) { _ = procgroup.Signal(c.cmd.Process.Pid, s) }

// stop sends SIGTERM and waits for the exit; it returns 0 when the child
// stopped cleanly, else 1.
func (c *child) stop() int {
	c.stopping.Store(true)
	c.signal(syscall.SIGTERM)
	<-c.done
	return c.exitCode()
}

// crashed reports whether the child died by a signal it did not get from
// ballet up (kill -9, the OOM killer, a crash): ballet up starts it again.
// A child that exited by itself, with any status, is not started again.
func (c *child) crashed() bool {
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && !c.stopping.Load()
}

func (c *child) exitCode() int {
	if c.err != nil {
		return 1
	}
	return 0
}

func (c *child) state() string {
	if c.err != nil {
		return c.err.Error()
	}
	return "exit status 0"
}

// cause is how the child ended and the last line it printed, which says
// why when it failed.
func (c *child) cause() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == "" {
		return c.state()
	}
	return c.state() + "; its last words: " + c.last
}

// waitHealthy waits until healthy answers true: it fails when the child
// exits first (with its real cause: its exit and its last line), a signal
// comes or ctx ends.
func waitHealthy(ctx context.Context, who string, c *child, sig <-chan os.Signal, healthy func() (bool, error)) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := healthy()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s stopped before it was ready (%s)", who, c.cause())
		case <-sig:
			return fmt.Errorf("stopped before %s was ready", who)
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s was not ready within %s: %v", who, upReady, last)
			}
			return fmt.Errorf("%s was not ready within %s", who, upReady)
		case <-tick.C:
		}
	}
}

// answers tells whether url answers 200.
func answers(url string) bool {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// upAPI is the bit of Core's API ballet up calls.
type upAPI struct {
	base, token string
}

// upRunnerTokenFile, next to the bootstrap token, keeps ballet up's runner
// token (its id and secret, 0600) from one start to the next: a restarted
// ballet up's runner registers as the same runner, so that Core ends at
// once the runs its predecessor held when it was killed (interrupted,
// runner_restart) instead of after [runs] grace.
const upRunnerTokenFile = "up-runner-token"

// keptRunnerToken returns the runner token kept in path while Core still
// takes it (not revoked, not expired), else a new one, kept there.
func (a *upAPI) keptRunnerToken(path string) (secret, id string, err error) {
	if b, rerr := os.ReadFile(path); rerr == nil {
		if id, secret, ok := strings.Cut(strings.TrimSpace(string(b)), "\n"); ok && a.live(id) {
			return secret, id, nil
		}
	}
	if secret, id, err = a.runnerToken(); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(path, []byte(id+"\n"+secret+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("keep the runner's token in %s: %w", path, err)
	}
	return secret, id, nil
}

// live tells whether runner token id is one Core still takes.
func (a *upAPI) live(id string) bool {
	var list struct {
		Tokens []struct {
			ID        string     `json:"id"`
			RevokedAt *time.Time `json:"revoked_at"`
			ExpiresAt *time.Time `json:"expires_at"`
		} `json:"tokens"`
	}
	if err := a.do("GET", "/api/v1/tokens?kind=runner&limit=1000", nil, http.StatusOK, &list); err != nil {
		return false
	}
	for _, t := range list.Tokens {
		if t.ID == id {
			return t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(time.Now()))
		}
	}
	return false
}

// runnerToken creates a runner token and returns its secret and id.
func (a *upAPI) runnerToken() (secret, id string, err error) {
	host, _ := os.Hostname()
	var created struct {
		Token string `json:"token"`
		ID    string `json:"id"`
	}
	body := map[string]string{"name": "ballet up runner on " + host, "kind": "runner"}
	if err := a.do("POST", "/api/v1/tokens", body, http.StatusCreated, &created); err != nil {
		return "", "", err
	}
	return created.Token, created.ID, nil
}

// registered tells whether the runner of token id registered with Core.
func (a *upAPI) registered(id string) (bool, error) {
	var list struct {
		Runners []struct {
			TokenID string `json:"token_id"`
		} `json:"runners"`
	}
	if err := a.do("GET", "/api/v1/runners", nil, http.StatusOK, &list); err != nil {
		return false, err
	}
	for _, r := range list.Runners {
		if r.TokenID == id {
			return true, nil
		}
	}
	return false, nil
}

func (a *upAPI) revoke(id string) error {
	return a.do("DELETE", "/api/v1/tokens/"+id, nil, http.StatusNoContent, nil)
}

func (a *upAPI) do(method, path string, in any, want int, out any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := outbound.Client(30 * time.Second).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want && !(want == http.StatusNoContent && resp.StatusCode == http.StatusOK) {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// prefixer writes whole lines of several children to one writer, each
// with its child's prefix.
type prefixer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *prefixer) prefix(s string) io.Writer { return prefixed{p, s} }

type prefixed struct {
	p *prefixer
	s string
}

func (w prefixed) Write(line []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	_, err := w.p.w.Write(append([]byte(w.s), line...))
	return len(line), err
}
