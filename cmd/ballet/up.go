package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/config"
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

The runner's lines are prefixed "runner |", Core's "core |". Ballet is up
even when the runner cannot run sessions (no agent CLI, no bubblewrap): the
runner then says why at start, registers with Core to show it, and leases
nothing; if it stops, Core keeps running.

SIGINT or SIGTERM stops both: the runner first (it drains its sessions for
[runner] drain; a second signal stops them at once), then Core. When Core
exits, the runner is stopped too. 'ballet serve' and 'ballet runner' remain
for real deployments.

Exit status: 0 after a stop, 1 when Core cannot start or fails, 2 for a
usage or configuration error.
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
	// The bootstrap token first, by Core's own rule: Core reads the same.
	tokenFile := cfg.BootstrapTokenPath()
	bootstrap, _, err := auth.Bootstrap(cfg.Auth.BootstrapToken, tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		return 1
	}
	out := &prefixer{w: stderr}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)

	var configArgs []string
	if *path != "" {
		configArgs = []string{"--config", *path}
	}
	// The service credential Core and Knowledge share: configured, or made
	// for this run; handed to both in their environment, never printed.
	serviceToken, err := cfg.KnowledgeToken(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		return 2
	}
	if serviceToken == "" {
		b := make([]byte, 32)
		rand.Read(b) // never fails (crypto/rand, Go 1.24+)
		serviceToken = hex.EncodeToString(b)
	}
	// Core must find the service where it listens.
	kcfg, err := config.LoadKnowledge(*kpath)
	if err != nil {
		fmt.Fprintln(stderr, "ballet up: the Knowledge service's configuration:", err)
		return 2
	}
	if want := "http://" + kcfg.HTTP.Addr; strings.TrimRight(cfg.Knowledge.URL, "/") != want {
		fmt.Fprintf(stderr, "ballet up: warning: Core's [knowledge] url is %s but the Knowledge service listens on %s: set [knowledge] url = %q in %s for Core to reach it\n",
			cfg.Knowledge.URL, kcfg.HTTP.Addr, want, cmp.Or(*path, "Core's configuration"))
	}
	childEnv := append(os.Environ(), config.KnowledgeEnvToken+"="+serviceToken)
	core, err := startChild(self, append([]string{"serve"}, configArgs...), childEnv, out.prefix("core | "))
	if err != nil {
		fmt.Fprintln(stderr, "ballet up: starting Core:", err)
		return 1
	}
	fmt.Fprintf(stderr, "ballet up: Core started (pid %d) on %s\n", core.cmd.Process.Pid, base)
	ctx, cancel := context.WithTimeout(context.Background(), upReady)
	err = waitReady(ctx, base, core, sig)
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, "ballet up:", err)
		return core.stop()
	}
	api := &upAPI{base: base, token: bootstrap}
	runnerToken, tokenID, err := api.runnerToken()
	if err != nil {
		fmt.Fprintf(stderr, "ballet up: creating the runner's token: %v; Core keeps running without a runner\n", err)
	}
	var run *child
	if err == nil {
		env := append(os.Environ(), EnvRunnerToken+"="+runnerToken)
		run, err = startChild(self, append(append([]string{"runner"}, configArgs...), "--server", base, "--keep-going"), env, out.prefix("runner | "))
		if err != nil {
			fmt.Fprintf(stderr, "ballet up: starting the runner: %v; Core keeps running without a runner\n", err)
		} else {
			fmt.Fprintf(stderr, "ballet up: runner started (pid %d)\n", run.cmd.Process.Pid)
		}
	}
	kargs := []string{"knowledge", "--core", base}
	if *kpath != "" {
		kargs = append(kargs, "--config", *kpath)
	}
	know, err := startChild(self, kargs, childEnv, out.prefix("knowledge | "))
	if err != nil {
		fmt.Fprintf(stderr, "ballet up: starting the Knowledge service: %v; Core keeps running without it\n", err)
	} else {
		fmt.Fprintf(stderr, "ballet up: Knowledge service started (pid %d)\n", know.cmd.Process.Pid)
	}
	var knowDone <-chan struct{}
	if know != nil {
		knowDone = know.done
	}
	stopKnowledge := func() {
		if know != nil {
			know.stop()
		}
	}
	fmt.Fprintf(stderr, "ballet up: Ballet is up: %s/api/v1 (bootstrap token in %s). Ctrl-C stops it.\n", base, tokenFile)

	var runnerDone <-chan struct{}
	if run != nil {
		runnerDone = run.done
	}
	for {
		select {
		case <-knowDone:
			knowDone = nil
			fmt.Fprintf(stderr, "ballet up: the Knowledge service stopped (%s); Core keeps running\n", know.state())
		case <-runnerDone:
			runnerDone = nil
			fmt.Fprintf(stderr, "ballet up: the runner stopped (%s); Core keeps running\n", run.state())
		case <-core.done:
			fmt.Fprintf(stderr, "ballet up: Core stopped (%s); stopping the runner and the Knowledge service\n", core.state())
			if run != nil {
				run.stop()
			}
			stopKnowledge()
			if core.exitCode() != 0 {
				return 1
			}
			return 0
		case <-sig:
			fmt.Fprintln(stderr, "ballet up: stopping the runner, then the Knowledge service and Core (a second signal stops the runner's sessions at once)")
			if run != nil {
				go func() {
					if _, ok := <-sig; ok {
						run.signal(syscall.SIGTERM)
					}
				}()
				run.stop()
				if tokenID != "" {
					if err := api.revoke(tokenID); err != nil {
						fmt.Fprintf(stderr, "ballet up: revoking the runner's token: %v\n", err)
					}
				}
			}
			stopKnowledge()
			return core.stop()
		}
	}
}

// child is a process ballet up started.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited and its output is read
	err  error
	out  sync.WaitGroup
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
	c.signal(syscall.SIGTERM)
	<-c.done
	return c.exitCode()
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

// waitReady waits until Core answers /readyz, Core exits, a signal comes or
// ctx ends.
func waitReady(ctx context.Context, base string, core *child, sig <-chan os.Signal) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-core.done:
			return fmt.Errorf("Core stopped before it was ready (%s)", core.state())
		case <-sig:
			return errors.New("stopped before Core was ready")
		case <-ctx.Done():
			return fmt.Errorf("Core was not ready within %s", upReady)
		case <-tick.C:
		}
	}
}

// upAPI is the bit of Core's API ballet up calls.
type upAPI struct {
	base, token string
}

// runnerToken creates a runner token and returns its secret and id.
func (a *upAPI) runnerToken() (secret, id string, err error) {
	host, _ := os.Hostname()
	var created struct {
		Token string `json:"token"`
		ID    string `json:"id"`
	}
	body := map[string]string{"name": "ballet up runner on " + host + " (pid " + strconv.Itoa(os.Getpid()) + ")", "kind": "runner"}
	if err := a.do("POST", "/api/v1/tokens", body, http.StatusCreated, &created); err != nil {
		return "", "", err
	}
	return created.Token, created.ID, nil
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
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
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
