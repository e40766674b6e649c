package main

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// hangGuard is how long the restart test waits for one thing — Core
// ready, an API answer, the flow's next move — before it calls it a hang.
// It guards against a hang on a busy machine; it is not a speed claim.
const hangGuard = 2 * time.Minute

var (
	testforgeOnce sync.Once
	testforgeBin  string
	testforgeErr  error
)

// testforgeBinary builds (once) the binary with the ballet_testforge tag:
// on its plain-git forge Ballet merges (gitforge.Merging), so a test sees
// Ballet's own merges. TestMain's binary is built as a release is.
func testforgeBinary(t *testing.T) string {
	testforgeOnce.Do(func() {
		testforgeBin = filepath.Join(filepath.Dir(binary), "ballet-testforge")
		out, err := exec.Command("go", "build", "-tags", "ballet_testforge", "-o", testforgeBin, ".").CombinedOutput()
		if err != nil {
			testforgeErr = fmt.Errorf("build with the ballet_testforge tag: %v\n%s", err, out)
		}
	})
	if testforgeErr != nil {
		t.Fatal(testforgeErr)
	}
	return testforgeBin
}

// coreProc is a real `ballet serve` process that the test kills with
// SIGKILL — or that kills itself at an armed fault point — and restarts on
// the same address and database.
type coreProc struct {
	t      *testing.T
	bin    string
	dir    string
	config string
	addr   string
	log    *lockedBuffer

	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
	armed      string // BALLET_FAULT of the running process
	kills      int    // SIGKILLs sent by the test
	faultKills int    // deaths at an armed fault point

	doc *openapitest.Doc // what Core serves: do checks every answer against it
}

// lockedBuffer collects the output of Core's processes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newCoreProc(t *testing.T, bin, storage string) *coreProc {
	dir := t.TempDir()
	c := &coreProc{t: t, bin: bin, dir: dir, addr: freeAddr(t), config: filepath.Join(dir, "ballet.toml"), log: &lockedBuffer{}}
	cfg := fmt.Sprintf(`%s
[http]
addr = %q
[jobs]
lease = "2s"
poll = "50ms"
[leader]
ttl = "2s"
renew = "500ms"
[auth]
bootstrap_token = %q
`, storage, c.addr, apitest.BootstrapToken)
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.start("")
	status, b := c.do("", "GET", "/api/v1/openapi.json", nil)
	doc, err := openapitest.Load(b)
	if status != 200 || err != nil {
		t.Fatalf("GET /api/v1/openapi.json: %d %v", status, err)
	}
	c.doc = doc
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("core log (last 4 KB):\n%s", tail(c.log.String(), 4096))
		}
	})
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start starts Core with a fault point armed (none when empty) and waits
// until it answers /readyz.
func (c *coreProc) start(faultSpec string) {
	c.t.Helper()
	cmd := exec.Command(c.bin, "serve", "--config", c.config)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.Env = append(os.Environ(), fault.EnvVar+"="+faultSpec)
	fmt.Fprintf(c.log, "=== start, %s=%q\n", fault.EnvVar, faultSpec)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.mu.Lock()
	c.cmd, c.exited, c.armed = cmd, exited, faultSpec
	c.mu.Unlock()
	for deadline := time.Now().Add(hangGuard); ; {
		resp, err := http.Get("http://" + c.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if c.dead() {
			if faultSpec != "" {
				return // it may reach its fault point at once: the next call revives it
			}
			c.t.Fatalf("core exited while starting:\n%s", tail(c.log.String(), 4096))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("core was not ready after %s (hang guard):\n%s", hangGuard, tail(c.log.String(), 4096))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *coreProc) dead() bool {
	c.mu.Lock()
	exited := c.exited
	c.mu.Unlock()
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// armedNow is the fault point the running Core has armed ("" when none).
func (c *coreProc) armedNow() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed
}

// kill kills Core with SIGKILL and waits until it is gone.
func (c *coreProc) kill() {
	c.t.Helper()
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(hangGuard):
		c.t.Fatalf("core (pid %d) was still there %s after SIGKILL (hang guard)", cmd.Process.Pid, hangGuard)
	}
}

// crash kills Core with SIGKILL and starts it again, with faultSpec armed.
func (c *coreProc) crash(faultSpec string) {
	c.t.Helper()
	c.kill()
	c.kills++
	c.start(faultSpec)
}

// revive starts Core again after it died by itself, which it may only do
// at an armed fault point.
func (c *coreProc) revive() {
	c.t.Helper()
	c.mu.Lock()
	armed, state := c.armed, c.cmd.ProcessState
	c.mu.Unlock()
	if ws, ok := state.Sys().(syscall.WaitStatus); armed == "" || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		c.t.Fatalf("core died (%s) without an armed fault point (armed %q):\n%s", state, armed, tail(c.log.String(), 4096))
	}
	c.faultKills++
	c.start("")
}

// do calls the API, retrying while Core is restarting; a Core that died at
// its armed fault point is started again.
func (c *coreProc) do(token, method, path string, body any) (int, []byte) {
	c.t.Helper()
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	deadline := time.Now().Add(hangGuard)
	for {
		req, _ := http.NewRequest(method, "http://"+c.addr+path, bytes.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if c.doc != nil && c.doc.Documented(req) {
				if err := c.doc.Response(req, resp.StatusCode, resp.Header, b); err != nil {
					c.t.Error(err)
				}
			}
			return resp.StatusCode, b
		}
		if c.dead() {
			c.revive()
			continue
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s %s: %v (hang guard %s)", method, path, err, hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *coreProc) must(want int, token, method, path string, body any, out any) {
	c.t.Helper()
	status, b := c.do(token, method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: %d %s (want %d)", method, path, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// TestRestartBetweenEverySteps runs the template pipeline on the real
// binary, killing Core with SIGKILL after every step the runner takes and
// every time the flow moved, and once by itself right after Ballet merged
// the ticket's branch (fault point forge.merged), before the flow recorded
// it. It must reach the same final state as an undisturbed run: done, with
// one run per stage step, no flow transition twice, events in seq order,
// and exactly one merge — by Ballet, of the head the runner pushed.
func TestRestartBetweenEverySteps(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "rqlite"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			storage := "[storage]\npath = \"data/core.db\""
			if engine == "rqlite" {
				cl := rqlitetest.Start(t, 1)
				storage = fmt.Sprintf("[storage]\nengine = \"rqlite\"\nurl = %q\npath = \"data/core.db\"", strings.Join(cl.URLs(), ","))
			}
			restartScenario(t, newCoreProc(t, testforgeBinary(t), storage))
		})
	}
}

func restartScenario(t *testing.T, c *coreProc) {
	admin := apitest.BootstrapToken
	repo := apitest.NewGitRepo(t)
	if !strings.Contains(c.log.String(), "test build (ballet_testforge)") {
		t.Fatalf("Core does not say it is a test build: Ballet would not merge:\n%s", tail(c.log.String(), 4096))
	}
	c.must(201, admin, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"}, nil)
	c.must(201, admin, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": repo.Bare}, "merge_policy": map[string]any{"mode": "auto"}}, nil)
	var it struct{ Key string }
	c.must(201, admin, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "survive", "state": "ready"}, &it)
	var tok struct{ Token string }
	c.must(201, admin, "POST", "/api/v1/tokens", map[string]any{"name": "runner", "kind": "runner"}, &tok)
	var rn struct{ ID string }
	c.must(201, tok.Token, "POST", "/api/v1/runners", map[string]any{"name": "r"}, &rn)
	// The scheduler starts the ready ticket on its own.
	for deadline := time.Now().Add(hangGuard); ; {
		if status, _ := c.do(admin, "GET", "/api/v1/items/"+it.Key+"/flow", nil); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not start the ready ticket (hang guard %s)", hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.crash("")

	type flowView struct{ Stage, Status, Waiting string }
	script := map[string][]string{"implement": {"done", "done"}, "review": {"failed", "done"}, "verify": {"done"}}
	lastState := ""
	pushed := ""        // the head of the ticket's branch the runner pushed
	moved := time.Now() // when the flow last moved
	for {
		var f flowView
		c.must(200, admin, "GET", "/api/v1/items/"+it.Key+"/flow", nil, &f)
		state := f.Status + "/" + f.Waiting + "/" + f.Stage
		if f.Status == "done" {
			break
		}
		if state != lastState {
			lastState, moved = state, time.Now()
			if c.armedNow() == "" { // an armed Core is left to reach its fault point
				c.crash("") // between two steps of the flow
			}
			continue
		}
		if time.Since(moved) > hangGuard {
			t.Fatalf("the flow did not move for %s (hang guard); it is %s", hangGuard, state)
		}
		switch {
		case f.Waiting == "run":
			status, b := c.do(tok.Token, "POST", "/api/v1/runners/"+rn.ID+"/lease", map[string]any{"wait_seconds": 1})
			if status == 204 {
				continue
			}
			if status != 200 {
				t.Fatalf("lease: %d %s", status, b)
			}
			var l struct {
				Run      struct{ ID, Stage string }
				RunToken string `json:"run_token"`
			}
			_ = json.Unmarshal(b, &l)
			outcomes := script[l.Run.Stage]
			if len(outcomes) == 0 {
				t.Fatalf("an unexpected run of stage %s (a duplicate?)", l.Run.Stage)
			}
			script[l.Run.Stage] = outcomes[1:]
			c.crash("") // after the lease
			if l.Run.Stage == "verify" {
				repo.PushBranch("ballet/" + it.Key)
				pushed = gitOut(t, repo.Bare, "rev-parse", "refs/heads/ballet/"+it.Key)
			}
			c.must(200, l.RunToken, "POST", "/api/v1/runs/"+l.Run.ID+"/report", map[string]any{"outcome": outcomes[0], "summary": "ok"}, nil)
			c.crash("") // between report and finish
			c.must(200, tok.Token, "POST", "/api/v1/runs/"+l.Run.ID+"/finish", map[string]any{"exit_status": 0}, nil)
			armed := ""
			if l.Run.Stage == "verify" {
				armed = gitforge.FaultMerged // the merge comes next: Core dies right after it merges
			}
			c.crash(armed) // right after the finish
		default:
			time.Sleep(50 * time.Millisecond) // polling a real process: the merge stage checks every 5 s
		}
	}
	for stage, rest := range script {
		if len(rest) > 0 {
			t.Fatalf("stage %s still expected %v runs", stage, rest)
		}
	}
	if c.faultKills != 1 {
		t.Fatalf("Core died %d times at the fault point %s, want once: the merge after a kill was not exercised", c.faultKills, gitforge.FaultMerged)
	}
	var runs struct {
		Runs []struct {
			Stage, Status string
			Step          int
		}
	}
	c.must(200, admin, "GET", "/api/v1/items/"+it.Key+"/runs", nil, &runs)
	steps := map[int]bool{}
	for _, r := range runs.Runs {
		if steps[r.Step] || r.Status != "succeeded" {
			t.Fatalf("runs %+v", runs.Runs)
		}
		steps[r.Step] = true
	}
	if len(runs.Runs) != 5 {
		t.Fatalf("%d runs, want 5 (implement, review, implement, review, verify): %+v", len(runs.Runs), runs.Runs)
	}
	var evs struct {
		Events []struct {
			Seq     int64
			Type    string
			Payload struct{ Step int }
		}
	}
	c.must(200, admin, "GET", "/api/v1/projects/ACME/events?limit=1000", nil, &evs)
	var raw struct{ Events []json.RawMessage }
	c.must(200, admin, "GET", "/api/v1/projects/ACME/events?limit=1000", nil, &raw)
	for _, e := range raw.Events {
		if err := c.doc.Event(e); err != nil {
			t.Error(err)
		}
	}
	seen := map[string]bool{}
	for i, e := range evs.Events {
		if i > 0 && e.Seq <= evs.Events[i-1].Seq {
			t.Fatalf("events out of seq order at %d: %d after %d", i, e.Seq, evs.Events[i-1].Seq)
		}
		if !strings.HasPrefix(e.Type, "flow.") || e.Type == "flow.waiting" {
			continue
		}
		k := fmt.Sprintf("%s@%d", e.Type, e.Payload.Step)
		if seen[k] {
			t.Fatalf("duplicate flow transition %s", k)
		}
		seen[k] = true
	}
	if !seen["flow.done@6"] {
		t.Fatalf("no flow.done at step 6: %v", seen)
	}
	var item struct{ State string }
	c.must(200, admin, "GET", "/api/v1/items/"+it.Key, nil, &item)
	if item.State != "done" {
		t.Fatalf("ticket %s", item.State)
	}
	// Exactly one merge, by Ballet, of the head the runner pushed.
	merges, err := gitforge.NewMerging("").Merges(context.Background(), forge.Repo{URL: repo.Bare, DefaultBranch: "main"}, "ballet/"+it.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(merges) != 1 || merges[0] != pushed {
		t.Fatalf("Ballet merged ballet/%s at %v, want exactly once, at %s", it.Key, merges, pushed)
	}
	if log := gitOut(t, repo.Bare, "log", "--format=%s", "main"); strings.Count(log, "ballet/"+it.Key) != 1 {
		t.Fatalf("main's history mentions the branch other than once:\n%s", log)
	}
	t.Logf("restart: %d SIGKILLs by the test, %d at the fault point after the merge, %d runs, %d events, ticket done, merged once",
		c.kills, c.faultKills, len(runs.Runs), len(evs.Events))
}

// gitOut runs git in dir and returns its trimmed output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
