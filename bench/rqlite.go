package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/store/rqlite"
)

// rqliteVersion is the release the project runs against.
const rqliteVersion = "v8.43.4"

// The node flags internal/rqlitetest uses: -fk enforces foreign keys like
// the SQLite engine; low Raft timeouts.
var raftFlags = []string{
	"-fk",
	"-raft-election-timeout", "150ms",
	"-raft-timeout", "150ms",
	"-raft-leader-lease-timeout", "100ms",
}

// procs are the rqlited processes this program started; killAll kills
// exactly these.
var procs struct {
	mu  sync.Mutex
	all map[*node]bool
}

func killAll() {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	for nd := range procs.all {
		nd.kill()
		delete(procs.all, nd)
	}
}

type node struct {
	id, httpAddr, raftAddr, url, dir, logPath, join string

	cmd  *exec.Cmd
	done chan struct{}
}

type cluster struct{ nodes []*node }

func rqlitedPath(flagValue string) (string, error) {
	path := flagValue
	if path == "" {
		path = os.Getenv("BALLET_RQLITED")
	}
	if path == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(home, ".cache")
		}
		path = filepath.Join(cache, "ballet", "bin", "rqlited-"+rqliteVersion)
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return "", fmt.Errorf("rqlited not found at %s: build it with ../scripts/rqlited.sh or pass -rqlited", path)
	}
	return path, nil
}

// startCluster starts n nodes under root and returns once the leader sees n
// reachable voters.
func startCluster(bin, root string, n int) (*cluster, error) {
	c := &cluster{}
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("n%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, &node{id: fmt.Sprintf("n%d", i+1), dir: dir, logPath: filepath.Join(dir, "rqlited.log")})
	}
	if err := c.nodes[0].boot(bin); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w%s", err, c.tails())
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.nodes[1:] {
		nd.join = c.nodes[0].raftAddr
		wg.Go(func() { errs[i+1] = nd.boot(bin) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w%s", err, c.tails())
	}
	if err := c.waitVoters(n); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w%s", err, c.tails())
	}
	return c, nil
}

func (c *cluster) urls() []string {
	out := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		out[i] = nd.url
	}
	return out
}

// stop kills the cluster's processes and waits for them to exit.
func (c *cluster) stop() {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	for _, nd := range c.nodes {
		nd.kill()
		delete(procs.all, nd)
	}
}

func (c *cluster) tails() string {
	var b strings.Builder
	for _, nd := range c.nodes {
		data, _ := os.ReadFile(nd.logPath)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		fmt.Fprintf(&b, "\n--- %s (%s) %s:\n%s", nd.id, nd.httpAddr, nd.logPath, strings.Join(lines, "\n"))
	}
	return b.String()
}

// boot starts the node on free ports, retrying on a port taken meanwhile.
func (nd *node) boot(bin string) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		nd.httpAddr, nd.raftAddr = ports[0], ports[1]
		nd.url = "http://" + nd.httpAddr
		if err := nd.spawn(bin); err != nil {
			return fmt.Errorf("start %s: %w", nd.id, err)
		}
		err = nd.waitReady()
		if err == nil {
			return nil
		}
		logText, _ := os.ReadFile(nd.logPath)
		if nd.alive() || attempt >= 5 || !strings.Contains(string(logText), "address already in use") {
			return err
		}
		os.RemoveAll(nd.dir)
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			return err
		}
	}
}

func (nd *node) spawn(bin string) error {
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"-node-id", nd.id, "-http-addr", nd.httpAddr, "-raft-addr", nd.raftAddr}
	args = append(args, raftFlags...)
	if nd.join != "" {
		args = append(args, "-join", nd.join)
	}
	args = append(args, nd.dir)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group (a terminal's Ctrl-C does not reach it: killAll
	// does), and SIGKILL if this process dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	nd.cmd, nd.done = cmd, done
	if procs.all == nil {
		procs.all = map[*node]bool{}
	}
	procs.all[nd] = true
	return nil
}

// kill kills the node's process group (only the rqlited started here) and
// waits for it to exit. procs.mu must be held.
func (nd *node) kill() {
	if nd.cmd == nil {
		return
	}
	if nd.alive() {
		_ = syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
		_ = nd.cmd.Process.Kill()
	}
	<-nd.done
}

func (nd *node) alive() bool {
	if nd.done == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

func (nd *node) waitReady() error {
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for {
		if !nd.alive() {
			return fmt.Errorf("%s exited while starting", nd.id)
		}
		status, body, err := httpGet(nd.url + "/readyz")
		if err == nil && status == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(body)))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 20s: %s", nd.id, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitVoters waits until some node names a leader that lists n reachable
// voters.
func (c *cluster) waitVoters(n int) error {
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for {
		for _, nd := range c.nodes {
			m, err := nodesOf(nd)
			if err != nil {
				last = err.Error()
				continue
			}
			ok, leader := 0, false
			for _, mb := range m {
				if mb.Voter && mb.Reachable {
					ok++
				}
				leader = leader || (mb.Leader && mb.Reachable)
			}
			if ok == n && leader {
				return nil
			}
			last = fmt.Sprintf("%s: %d of %d voters reachable, leader known: %v", nd.id, ok, n, leader)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster did not form after 20s: %s", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type member struct {
	Voter     bool `json:"voter"`
	Reachable bool `json:"reachable"`
	Leader    bool `json:"leader"`
}

func nodesOf(nd *node) (map[string]member, error) {
	status, body, err := httpGet(nd.url + "/nodes")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s /nodes: HTTP %d", nd.id, status)
	}
	var m map[string]member
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	return m, nil
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func httpGet(url string) (int, []byte, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// withRqlite starts a fresh cluster of n nodes, opens a migrated Ballet
// store on it, runs fn, and kills the cluster.
func (b *bench) withRqlite(ctx context.Context, bin string, n int, name string, fn func(st *rqlite.Store) error) error {
	dir, err := b.tempDir(name)
	if err != nil {
		return err
	}
	c, err := startCluster(bin, dir, n)
	if err != nil {
		return fmt.Errorf("start %d-node rqlite cluster: %w", n, err)
	}
	defer c.stop()
	st, err := rqlite.Open(ctx, rqlite.Options{URLs: c.urls()})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := prepareBallet(ctx, st); err != nil {
		return err
	}
	return fn(st)
}

func (b *bench) rqliteTransitions(ctx context.Context) error {
	bin, err := rqlitedPath(b.o.rqlited)
	if err != nil {
		return err
	}
	for _, n := range []int{1, 3} {
		for _, writers := range b.writerCounts() {
			err := b.withRqlite(ctx, bin, n, fmt.Sprintf("rqlite%d-tx-%d", n, writers), func(st *rqlite.Store) error {
				ops, el, err := b.balletTransitions(ctx, st, writers, min(b.o.warmup, 20))
				if err != nil {
					return err
				}
				b.rep.add(Result{ID: fmt.Sprintf("tx/ballet-rqlite%d/%d", n, writers), System: fmt.Sprintf("Ballet rqlite %d node%s", n, plural(n)),
					What: fmt.Sprintf("transition batches, %d writer(s)", writers), Ops: ops, Seconds: el.Seconds()})
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) rqliteJobs(ctx context.Context) error {
	bin, err := rqlitedPath(b.o.rqlited)
	if err != nil {
		return err
	}
	return b.withRqlite(ctx, bin, 3, "rqlite3-jobs", func(st *rqlite.Store) error {
		el, err := b.balletJobs(ctx, st, b.o.jobsRqlite, 200)
		if err != nil {
			return err
		}
		b.rep.add(Result{ID: "jobs/ballet-rqlite3", System: "Ballet rqlite 3 nodes", What: fmt.Sprintf("no-op jobs, %d slots", b.o.slots),
			Ops: b.o.jobsRqlite, Seconds: el.Seconds()})
		return nil
	})
}
