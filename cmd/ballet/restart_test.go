package main

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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apitest"
	"github.com/ballet/ballet/internal/openapitest"
	"github.com/ballet/ballet/internal/rqlitetest"
)

// coreProc is a real `ballet serve` process that the test kills with
// SIGKILL and restarts on the same address and database.
type coreProc struct {
	t      *testing.T
	dir    string
	config string
	addr   string
	cmd    *exec.Cmd
	log    *bytes.Buffer
	kills  int
	doc    *openapitest.Doc // what Core serves: do checks every answer against it
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newCoreProc(t *testing.T, storage string) *coreProc {
	dir := t.TempDir()
	c := &coreProc{t: t, dir: dir, addr: freeAddr(t), config: filepath.Join(dir, "ballet.toml"), log: &bytes.Buffer{}}
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
	c.start()
	status, b := c.do("", "GET", "/api/v1/openapi.json", nil)
	doc, err := openapitest.Load(b)
	if status != 200 || err != nil {
		t.Fatalf("GET /api/v1/openapi.json: %d %v", status, err)
	}
	c.doc = doc
	t.Cleanup(func() {
		if c.cmd != nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
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

func (c *coreProc) start() {
	c.t.Helper()
	c.cmd = exec.Command(binary, "serve", "--config", c.config)
	c.cmd.Dir = c.dir
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + c.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("core did not become ready:\n%s", tail(c.log.String(), 4096))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crash kills Core with SIGKILL and starts it again.
func (c *coreProc) crash() {
	c.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
	c.kills++
	c.start()
}

// do calls the API, retrying while Core is restarting.
func (c *coreProc) do(token, method, path string, body any) (int, []byte) {
	c.t.Helper()
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	deadline := time.Now().Add(30 * time.Second)
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
		if time.Now().After(deadline) {
			c.t.Fatalf("%s %s: %v", method, path, err)
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
// binary, killing Core with SIGKILL after every step the runner or a human
// takes and every time the flow moved. It must reach the same final state
// as an undisturbed run: done, with one run per stage step, no duplicate
// flow transition, and a gapless event log.
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
			restartScenario(t, newCoreProc(t, storage))
		})
	}
}

func restartScenario(t *testing.T, c *coreProc) {
	admin := apitest.BootstrapToken
	repo := apitest.NewGitRepo(t)
	c.must(201, admin, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"}, nil)
	c.must(201, admin, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": repo.Bare}}, nil)
	var it struct{ Key string }
	c.must(201, admin, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "survive", "state": "ready"}, &it)
	var tok struct{ Token string }
	c.must(201, admin, "POST", "/api/v1/tokens", map[string]any{"name": "runner", "kind": "runner"}, &tok)
	var rn struct{ ID string }
	c.must(201, tok.Token, "POST", "/api/v1/runners", map[string]any{"name": "r"}, &rn)
	// The scheduler starts the ready ticket on its own.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if status, _ := c.do(admin, "GET", "/api/v1/items/"+it.Key+"/flow", nil); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler did not start the ready ticket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.crash()

	type flowView struct{ Stage, Status, Waiting string }
	script := map[string][]string{"implement": {"done", "done"}, "review": {"failed", "done"}, "verify": {"done"}}
	lastState := ""
	merged := false
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the flow did not finish; last state %s", lastState)
		}
		var f flowView
		c.must(200, admin, "GET", "/api/v1/items/"+it.Key+"/flow", nil, &f)
		state := f.Status + "/" + f.Waiting + "/" + f.Stage
		if f.Status == "done" {
			break
		}
		if state != lastState {
			lastState = state
			c.crash() // between two steps of the flow
			continue
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
			c.crash() // after the lease
			if l.Run.Stage == "verify" {
				repo.PushBranch("ballet/" + it.Key)
			}
			c.must(200, l.RunToken, "POST", "/api/v1/runs/"+l.Run.ID+"/report", map[string]any{"outcome": outcomes[0], "summary": "ok"}, nil)
			c.crash() // between report and finish
			c.must(200, l.RunToken, "POST", "/api/v1/runs/"+l.Run.ID+"/finish", map[string]any{"exit_status": 0}, nil)
			c.crash() // right after the finish
		case f.Waiting == "merge" && !merged:
			repo.MergeBranch("ballet/"+it.Key, false)
			merged = true
			c.crash()
		default:
			time.Sleep(50 * time.Millisecond)
		}
	}
	for stage, rest := range script {
		if len(rest) > 0 {
			t.Fatalf("stage %s still expected %v runs", stage, rest)
		}
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
	t.Logf("restart: %d SIGKILLs, %d runs, %d events, ticket done", c.kills, len(runs.Runs), len(evs.Events))
}
