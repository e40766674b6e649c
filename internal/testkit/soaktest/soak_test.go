// Package soaktest is the soak benchmark of a long-running install: many
// tickets through the real Core binary on its embedded SQLite, Core
// restarted (SIGTERM, and every other time kill -9) and the runner
// re-registered every few hundred tickets, once with Ballet's default
// retention and once keeping everything. It reports the database's size per
// ticket each way, Core's resident memory after the first restart period
// and at the end, and that every ticket ended done.
//
// The database's size is the data it holds (ballet_db_size_bytes less
// ballet_db_free_bytes): SQLite keeps the pages deletes free for new
// writes, so with retention the file stops growing rather than shrinking.
//
// It is a benchmark, not part of the suite (minutes to hours):
//
//	BALLET_SOAK_TICKETS=10000 go test -run '^$' -bench BenchmarkSoak -benchtime 1x -timeout 6h ./internal/testkit/soaktest
//
// BALLET_SOAK_TICKETS (default 2000) and BALLET_SOAK_RESTART_EVERY
// (default 500) size it. Each run uploads a 32 KiB log, reports and
// finishes as a runner would; the runner speaks the protocol in the test
// (the agent CLIs' cost is not what a soak measures).
package soaktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

const admin = apitest.BootstrapToken

// logChunk is what each run uploads as its session's log.
var logChunk = bytes.Repeat([]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"working on it"}]}}`+"\n"), 32<<10/84)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func BenchmarkSoak(b *testing.B) {
	tickets := envInt("BALLET_SOAK_TICKETS", 2000)
	every := envInt("BALLET_SOAK_RESTART_EVERY", 500)
	bin := filepath.Join(b.TempDir(), "ballet")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ballet/ballet/cmd/ballet").CombinedOutput(); err != nil {
		b.Fatalf("build ballet: %v\n%s", err, out)
	}
	b.ResetTimer()
	for range b.N {
		for _, mode := range []string{"retention", "kept"} {
			r := soak(b, bin, mode, tickets, every)
			b.ReportMetric(float64(r.dbBytes)/float64(tickets), "db-bytes/ticket-"+mode)
			b.ReportMetric(float64(r.fileBytes)/float64(tickets), "file-bytes/ticket-"+mode)
			b.ReportMetric(float64(r.rssStart)/(1<<20), "core-rss-MiB-start-"+mode)
			b.ReportMetric(float64(r.rssEnd)/(1<<20), "core-rss-MiB-end-"+mode)
			b.ReportMetric(float64(r.done), "done-"+mode)
			b.ReportMetric(float64(r.restarts), "core-restarts-"+mode)
			b.Logf("%s: %d tickets, %d done, data %.1f MiB (%.0f bytes a ticket) in a %.1f MiB file, Core RSS %.1f MiB after the first %d tickets, %.1f MiB at the end, %d Core restarts, %s",
				mode, tickets, r.done, float64(r.dbBytes)/(1<<20), float64(r.dbBytes)/float64(tickets), float64(r.fileBytes)/(1<<20), float64(r.rssStart)/(1<<20), every,
				float64(r.rssEnd)/(1<<20), r.restarts, r.took.Round(time.Second))
			if r.done != tickets {
				b.Errorf("%s: %d of %d tickets ended done", mode, r.done, tickets)
			}
		}
	}
}

type result struct {
	done, restarts     int
	dbBytes, fileBytes int64
	rssStart, rssEnd   int64
	took               time.Duration
}

// retentionConfig keeps everything for ten years ("kept"), or Ballet's
// default retention scaled down to the soak's minutes ("retention").
func retentionConfig(mode string) string {
	if mode == "kept" {
		return `[retention]
run_logs = "87600h"
jobs = "87600h"
sessions = "87600h"
notifications = "87600h"
deliveries = "87600h"
runners = "87600h"
`
	}
	return `[retention]
run_logs = "1m"
jobs = "1m"
sessions = "1m"
notifications = "1m"
deliveries = "1m"
runners = "10m"
interval = "15s"
`
}

type core struct {
	bin, dir, config, addr string
	cmd                    *exec.Cmd
	log                    *os.File
	hc                     *http.Client
}

func (c *core) start(b *testing.B) {
	b.Helper()
	c.cmd = exec.Command(c.bin, "serve", "--config", c.config)
	c.cmd.Dir, c.cmd.Stdout, c.cmd.Stderr = c.dir, c.log, c.log
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := c.hc.Get("http://" + c.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("Core was not ready after 2 min (see %s)", c.log.Name())
		}
	}
}

// stop stops Core: SIGTERM, or SIGKILL when hard.
func (c *core) stop(hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	_ = c.cmd.Process.Signal(sig)
	_ = c.cmd.Wait()
}

// rss is Core's resident memory in bytes.
func (c *core) rss(b *testing.B) int64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// call sends one request, retrying while Core restarts (transport errors
// and 5xx), and returns the answer.
func (c *core) call(token, method, path, contentType string, body []byte) (int, []byte) {
	wait := 20 * time.Millisecond
	for {
		req, _ := http.NewRequest(method, "http://"+c.addr+path, bytes.NewReader(body))
		if body != nil {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return resp.StatusCode, b
			}
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// Call implements apitest.Caller.
func (c *core) Call(token, method, path string, body any) (int, []byte) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			panic(err)
		}
	}
	return c.call(token, method, path, "application/json", raw)
}

func (c *core) must(b *testing.B, want int, method, path string, body, into any) {
	b.Helper()
	status, answer := c.Call(admin, method, path, body)
	if status != want {
		b.Fatalf("%s %s: %d %s, want %d", method, path, status, answer, want)
	}
	if into != nil {
		if err := json.Unmarshal(answer, into); err != nil {
			b.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// dbUsed is the part of Core's database that holds data, from /metrics:
// ballet_db_size_bytes less ballet_db_free_bytes (pages deletes freed,
// which the file keeps for new writes).
func (c *core) dbUsed(b *testing.B) (used, size int64) {
	_, m := c.call(admin, "GET", "/metrics", "", nil)
	read := func(name string) int64 {
		for _, l := range strings.Split(string(m), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return int64(f)
			}
		}
		b.Fatalf("no %s in /metrics", name)
		return 0
	}
	size = read("ballet_db_size_bytes")
	return size - read("ballet_db_free_bytes"), size
}

func soak(b *testing.B, bin, mode string, tickets, every int) result {
	started := time.Now()
	dir := b.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := &core{bin: bin, dir: dir, addr: addr, config: filepath.Join(dir, "ballet.toml"), hc: &http.Client{Timeout: 30 * time.Second}}
	cfg := fmt.Sprintf(`[storage]
path = "data/core.db"
[http]
addr = %q
[auth]
bootstrap_token = %q
[jobs]
poll = "50ms"
[runs]
grace = "5s"
%s`, addr, admin, retentionConfig(mode))
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	if c.log, err = os.Create(filepath.Join(dir, "core.log")); err != nil {
		b.Fatal(err)
	}
	defer c.log.Close()
	bare := filepath.Join(dir, "repo.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	c.start(b)
	defer func() {
		if c.cmd.ProcessState == nil {
			c.stop(false)
		}
	}()
	c.must(b, 201, "POST", "/api/v1/orgs", map[string]any{"slug": "soak", "name": "Soak"}, nil)
	c.must(b, 201, "POST", "/api/v1/orgs/soak/projects", map[string]any{"key": "SOAK", "name": "Soak",
		"repository": map[string]any{"forge": "git", "url": bare}, "concurrency_limit": 8}, nil)
	c.must(b, 200, "PUT", "/api/v1/projects/SOAK/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
		"max_iterations": 2,
		"stages": []any{map[string]any{"id": "implement", "kind": "agent", "adapter": "claude-code", "instructions": "Implement it.",
			"next": map[string]any{"done": "$done", "failed": "$question"}}}}}, nil)
	var tok struct{ Token string }
	c.must(b, 201, "POST", "/api/v1/tokens", map[string]any{"name": "soak-runner", "kind": "runner"}, &tok)

	var res result
	created := 0
	for created < tickets {
		n := min(every, tickets-created)
		for range n {
			c.must(b, 201, "POST", "/api/v1/projects/SOAK/items", map[string]any{"type": "task", "title": fmt.Sprintf("Soak %d", created+1), "state": "ready"}, nil)
			created++
		}
		// The runner works this period's tickets, then goes (its next
		// start registers again under the same name).
		work(b, c, tok.Token)
		if created == min(every, tickets) {
			res.rssStart = c.rss(b)
		}
		if created < tickets {
			c.stop(res.restarts%2 == 1) // SIGTERM, then kill -9, in turn
			res.restarts++
			c.start(b)
		}
	}
	res.rssEnd = c.rss(b)
	if mode == "retention" {
		time.Sleep(75 * time.Second) // past the one-minute retentions and a sweep
	}
	res.dbBytes, res.fileBytes = c.dbUsed(b)
	for after := 0; ; {
		var page struct {
			Items     []struct{ State string }
			NextAfter *int `json:"next_after"`
		}
		c.must(b, 200, "GET", fmt.Sprintf("/api/v1/projects/SOAK/items?state=done&limit=200&after=%d", after), nil, &page)
		res.done += len(page.Items)
		if page.NextAfter == nil {
			break
		}
		after = *page.NextAfter
	}
	res.took = time.Since(started)
	return res
}

// periodGuard bounds one period's wait for its tickets: a hang guard.
const periodGuard = 15 * time.Minute

// work runs a runner with four sessions at once until no ticket is left
// to work: lease, upload the log, report done, finish.
func work(b *testing.B, c *core, token string) {
	deadline := time.Now().Add(periodGuard)
	p := &apitest.Protocol{C: c, Token: token}
	if status, body := p.Register("soak-runner"); status != 201 {
		b.Fatalf("register: %d %s", status, body)
	}
	stop := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, ok, status, body := p.Lease(1, runproto.ClaudeCode)
				if status == 204 || (status == 200 && !ok) {
					if settled(b, c) {
						once.Do(func() { close(stop) })
					} else if time.Now().After(deadline) {
						b.Errorf("the period's tickets had not ended after %s", periodGuard)
						once.Do(func() { close(stop) })
					}
					continue
				}
				if status != 200 {
					b.Errorf("lease: %d %s", status, body)
					once.Do(func() { close(stop) })
					return
				}
				if st, body := c.call(token, "POST", "/api/v1/runs/"+l.ID+"/log?offset=0", "application/octet-stream", logChunk); st != 200 {
					b.Errorf("log: %d %s", st, body)
				}
				if st, body := p.Report(l, "done", "Implemented."); st != 200 {
					b.Errorf("report: %d %s", st, body)
				}
				usage := &runproto.Usage{InputTokens: 12000, OutputTokens: 3000, CostUSD: 0.05}
				if st, body := p.Finish(l.ID, 0, usage); st != 200 {
					b.Errorf("finish: %d %s", st, body)
				}
			}
		})
	}
	wg.Wait()
}

// settled reports whether no ticket is ready or in progress: the period's
// tickets all ended (done, or stuck on a question, which the final count
// shows).
func settled(b *testing.B, c *core) bool {
	for _, state := range []string{"ready", "in_progress"} {
		var page struct {
			Items []struct{} `json:"items"`
		}
		c.must(b, 200, "GET", "/api/v1/projects/SOAK/items?limit=1&state="+state, nil, &page)
		if len(page.Items) > 0 {
			return false
		}
	}
	return true
}
