// Package rqlitetest starts real rqlite clusters (rqlited processes on
// 127.0.0.1) for tests. The rqlited binary is built once per machine by
// scripts/rqlited.sh and cached; see Binary.
//
// Every node runs in its own process group with foreign keys enforced
// (-fk) and low Raft timeouts, keeps its
// data in a t.TempDir and its output in a log file inside its data folder.
// The processes are killed when the test ends, and their log tails are
// printed if the test failed.
package rqlitetest

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/ballet/ballet/internal/procgroup"
)

// Version is the rqlite release the tests run against.
const Version = "v8.43.4"

const (
	pollInterval = 10 * time.Millisecond
	// maxWait bounds every wait for nodes to come up or a leader to appear.
	maxWait = 20 * time.Second
	// logTail is how many lines of each node's log a failed test prints.
	logTail = 40
)

// Node flags. -fk enforces foreign keys like the SQLite engine
// (rqlited leaves them off by default). Low Raft timeouts: a single node is
// ready in ~250 ms, and a leader is re-elected quickly after a kill.
var nodeFlags = []string{
	"-fk",
	"-raft-election-timeout", "150ms",
	"-raft-timeout", "150ms",
	"-raft-leader-lease-timeout", "100ms",
}

// SkipEnv is the environment variable a developer sets to 1 to skip every
// test that needs rqlited. Nothing else skips them: without it, a missing
// binary fails the test.
const SkipEnv = "BALLET_SKIP_RQLITE"

// Binary returns the rqlited path: $BALLET_RQLITED if set, else
// ${XDG_CACHE_HOME:-~/.cache}/ballet/bin/rqlited-v8.43.4. The test is
// skipped only when BALLET_SKIP_RQLITE=1 asks for it; a missing binary
// fails it.
func Binary(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(SkipEnv); v {
	case "1":
		t.Skipf("rqlitetest: %s=1: the tests that need rqlite are skipped", SkipEnv)
	case "", "0":
	default:
		t.Fatalf("rqlitetest: %s=%q: set it to 1 to skip the tests that need rqlite, or leave it unset", SkipEnv, v)
	}
	path := os.Getenv("BALLET_RQLITED")
	if path == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatalf("rqlitetest: find home folder: %v", err)
			}
			cache = filepath.Join(home, ".cache")
		}
		path = filepath.Join(cache, "ballet", "bin", "rqlited-"+Version)
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		t.Fatalf("rqlitetest: rqlited %s not found at %s: build it with scripts/rqlited.sh "+
			"(go mod download github.com/rqlite/rqlite/v8@%s, then CGO_ENABLED=1 go build ./cmd/rqlited "+
			"inside that module's folder in the module cache) or set BALLET_RQLITED; "+
			"%s=1 skips the tests that need it", Version, path, Version, SkipEnv)
	}
	return path
}

// Cluster is a set of rqlited processes forming one Raft cluster.
type Cluster struct {
	Nodes []*Node

	bin string
	mu  sync.Mutex // guards the processes of all nodes
}

// Node is one rqlited process.
type Node struct {
	ID       string
	HTTPAddr string // host:port of the HTTP API
	RaftAddr string // host:port of Raft
	URL      string // http://HTTPAddr
	DataDir  string
	LogPath  string // the process's stdout and stderr

	join string // Raft address to join, "" for the first node
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start starts a cluster of n nodes (1 or 3) and returns once every node is
// ready and a leader exists. The processes are killed when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	if n != 1 && n != 3 {
		t.Fatalf("rqlitetest: cluster size %d: use 1 or 3", n)
	}
	c, err := Launch(Binary(t), t.TempDir(), n)
	if err != nil {
		t.Fatalf("rqlitetest: %v", err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("rqlitetest: node logs%s", c.tails())
		}
	})
	return c
}

// Launch starts a cluster of n nodes of the rqlited at bin, with their data
// under root, outside any test (the benchmark program uses it); it returns
// once every node is ready and knows all n voters. Stop kills it.
func Launch(bin, root string, n int) (*Cluster, error) {
	c := &Cluster{bin: bin}
	for i := range n {
		nd := &Node{
			ID:      fmt.Sprintf("n%d", i+1),
			DataDir: filepath.Join(root, fmt.Sprintf("n%d", i+1)),
		}
		nd.LogPath = filepath.Join(nd.DataDir, "rqlited.log")
		if err := os.MkdirAll(nd.DataDir, 0o755); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	fail := func(err error) (*Cluster, error) {
		tails := c.tails()
		c.Stop()
		return nil, fmt.Errorf("%w%s", err, tails)
	}
	// The first node bootstraps the cluster; the others join it.
	if err := c.boot(c.Nodes[0]); err != nil {
		return fail(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.Nodes[1:] {
		nd.join = c.Nodes[0].RaftAddr
		wg.Go(func() { errs[i+1] = c.boot(nd) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	if err := c.waitMembers(n); err != nil {
		return fail(err)
	}
	return c, nil
}

// Stop kills every node of the cluster (exactly the processes it started)
// and waits for them to exit.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		c.killLocked(nd)
	}
}

// URLs returns the nodes' base URLs in node order.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		out[i] = nd.URL
	}
	return out
}

// Leader returns the node that currently leads, as a running node's
// /nodes reports it, waiting (bounded) until one names a live leader.
func (c *Cluster) Leader(t testing.TB) *Node {
	t.Helper()
	deadline := time.Now().Add(maxWait)
	var last string
	for {
		for _, nd := range c.running() {
			id, err := leaderOf(nd)
			if err != nil {
				last = err.Error()
				continue
			}
			if id == "" {
				last = nd.ID + " knows no leader"
				continue
			}
			for _, l := range c.Nodes {
				if l.ID == id && l.alive() {
					return l
				}
			}
			last = fmt.Sprintf("%s names leader %s, which is not running", nd.ID, id)
		}
		if time.Now().After(deadline) {
			t.Fatalf("rqlitetest: no leader after %s: %s%s", maxWait, last, c.tails())
		}
		time.Sleep(pollInterval)
	}
}

// Kill sends SIGKILL to the node's process and waits for it to exit.
func (c *Cluster) Kill(t testing.TB, n *Node) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killLocked(n)
}

// Restart starts a killed node again with the same id, addresses and data
// folder, and waits until it is ready.
//
// rqlited v8.43.4 can crash at start with "fatal error: concurrent map read
// and map write" in tcp.(*Mux).handleConn: its node mux accepts
// connections before all handlers are registered, and the live peers of a
// restarted node dial it at once. The crash happens before the store is
// opened, so Restart simply starts the node again.
func (c *Cluster) Restart(t testing.TB, n *Node) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c.mu.Lock()
		if n.alive() {
			c.mu.Unlock()
			t.Fatalf("rqlitetest: restart %s: it is still running", n.ID)
		}
		logStart := len(readFile(n.LogPath))
		err := c.spawnLocked(n)
		c.mu.Unlock()
		if err != nil {
			t.Fatalf("rqlitetest: restart %s: %v", n.ID, err)
		}
		err = n.waitReady()
		if err == nil {
			return
		}
		log := readFile(n.LogPath)
		if attempt < 5 && !n.alive() && len(log) >= logStart &&
			strings.Contains(log[logStart:], "concurrent map read and map write") {
			continue
		}
		t.Fatalf("rqlitetest: restart %s: %v%s", n.ID, err, c.tails())
	}
}

// WaitReady waits until every running node reports ready (which includes
// knowing a leader).
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	for _, nd := range c.running() {
		c.waitNodeReady(t, nd)
	}
}

// boot starts a node for the first time on free ports and waits until it
// is ready. If the process exits at once because a port was taken
// meanwhile, it starts again from an empty folder on other ports: rqlited
// binds both ports before it writes any state or joins.
func (c *Cluster) boot(nd *Node) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		nd.HTTPAddr, nd.RaftAddr = ports[0], ports[1]
		nd.URL = "http://" + nd.HTTPAddr
		c.mu.Lock()
		err = c.spawnLocked(nd)
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("start %s: %w", nd.ID, err)
		}
		err = nd.waitReady()
		if err == nil {
			return nil
		}
		if nd.alive() || attempt >= 5 || !strings.Contains(readFile(nd.LogPath), "address already in use") {
			return err
		}
		if err := os.RemoveAll(nd.DataDir); err != nil {
			return err
		}
		if err := os.MkdirAll(nd.DataDir, 0o755); err != nil {
			return err
		}
	}
}

// spawnLocked starts the node's process; c.mu must be held.
func (c *Cluster) spawnLocked(nd *Node) error {
	logf, err := os.OpenFile(nd.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"-node-id", nd.ID, "-http-addr", nd.HTTPAddr, "-raft-addr", nd.RaftAddr}
	args = append(args, nodeFlags...)
	if nd.join != "" {
		args = append(args, "-join", nd.join)
	}
	args = append(args, nd.DataDir)
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	procgroup.Own(cmd, syscall.SIGKILL)
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
	return nil
}

// killLocked kills the node's process group (it contains only the rqlited
// process started here) and waits for the process to exit.
func (c *Cluster) killLocked(nd *Node) {
	if nd.cmd == nil {
		return
	}
	if nd.alive() {
		procgroup.Kill(nd.cmd)
	}
	<-nd.done
}

func (c *Cluster) tails() string {
	var b strings.Builder
	for _, nd := range c.Nodes {
		fmt.Fprintf(&b, "\n--- %s (%s, %s) last %d lines of %s:\n%s", nd.ID, nd.HTTPAddr, nd.RaftAddr, logTail, nd.LogPath, tail(readFile(nd.LogPath), logTail))
	}
	return b.String()
}

func (c *Cluster) running() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, nd := range c.Nodes {
		if nd.alive() {
			out = append(out, nd)
		}
	}
	return out
}

func (nd *Node) alive() bool {
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

// waitNodeReady waits until the node is ready.
func (c *Cluster) waitNodeReady(t testing.TB, nd *Node) {
	t.Helper()
	if err := nd.waitReady(); err != nil {
		t.Fatalf("rqlitetest: %v%s", err, c.tails())
	}
}

// waitReady polls GET /readyz until it answers 200, the process exits, or
// maxWait passes.
func (nd *Node) waitReady() error {
	deadline := time.Now().Add(maxWait)
	var last string
	for {
		if !nd.alive() {
			return fmt.Errorf("%s exited while starting", nd.ID)
		}
		status, body, err := get(nd.URL + "/readyz")
		if err == nil && status == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(body)))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %s", nd.ID, maxWait, last)
		}
		time.Sleep(pollInterval)
	}
}

// waitMembers waits until every node's own Raft configuration lists n
// voters. The leader knows a joined node first; a follower that does not
// know it yet could not form a majority with it if the leader died now.
func (c *Cluster) waitMembers(n int) error {
	if n == 1 {
		return nil
	}
	deadline := time.Now().Add(maxWait)
	for {
		last := ""
		for _, nd := range c.Nodes {
			nodes, err := nodesOf(nd)
			if err != nil {
				last = err.Error()
				break
			}
			voters := 0
			for _, m := range nodes {
				if m.Voter && m.Reachable {
					voters++
				}
			}
			if voters != n {
				last = fmt.Sprintf("%s sees %d of %d voters", nd.ID, voters, n)
				break
			}
		}
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster did not form after %s: %s", maxWait, last)
		}
		time.Sleep(pollInterval)
	}
}

type member struct {
	ID        string `json:"id"`
	Voter     bool   `json:"voter"`
	Reachable bool   `json:"reachable"`
	Leader    bool   `json:"leader"`
}

func nodesOf(nd *Node) (map[string]member, error) {
	status, body, err := get(nd.URL + "/nodes")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s /nodes: HTTP %d: %s", nd.ID, status, strings.TrimSpace(string(body)))
	}
	var m map[string]member
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%s /nodes: %w", nd.ID, err)
	}
	return m, nil
}

// leaderOf returns the id of the leader the node knows, "" if none.
func leaderOf(nd *Node) (string, error) {
	m, err := nodesOf(nd)
	if err != nil {
		return "", err
	}
	for id, mb := range m {
		if mb.Leader && mb.Reachable {
			return id, nil
		}
	}
	return "", nil
}

var client = &http.Client{Timeout: 2 * time.Second}

func get(url string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// freePorts returns n distinct free 127.0.0.1 ports, as host:port. They are
// free when returned; another process may still take one before use.
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
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.TrimSpace([]byte(strings.Join(lines, "\n"))))
}
