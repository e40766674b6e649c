//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/testkit/agenttest"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// interruptPipeline is one agent stage: done ends the flow, anything
// else asks a question.
const interruptPipeline = `max_iterations: 3
stages:
  - id: implement
    kind: agent
    name: Implement
    next: {done: $done, failed: $question, blocked: $question}
`

// TestUpRestartedMidStage: a ticket whose `ballet up` is disturbed while
// its agent stage runs (the real claude-code, against the fake model's
// slow-work scenario) still ends done in iteration 1, with no question:
//   - drain: SIGTERM to ballet up, which drains its runner (the session
//     ends interrupted, runner_drain), then up started again;
//   - core: kill -9 of Core alone: ballet up starts it again and the
//     session goes on undisturbed — its one run succeeds;
//   - runner: kill -9 of the runner alone: ballet up starts it again, the
//     same runner, and Core ends the run it held at once
//     (runner_restart), not after [runs] grace;
//   - up: kill -9 of ballet up (its children get SIGTERM: the runner
//     drains while Core stops), then up started again: the old runner's
//     run ends interrupted (runner_restart or runner_drain, whichever
//     reaches the new Core first) and the old runner is gone in the end.
//
// The interrupted stage runs again from its checkpoint, in the same
// iteration.
func TestUpRestartedMidStage(t *testing.T) {
	t.Parallel()
	claude := agenttest.Claude(t)
	for _, c := range []struct {
		name    string
		reasons []string // the interrupted runs' reasons, in order
	}{
		{"drain", []string{"runner_drain"}},
		{"core", nil},
		{"runner", []string{"runner_restart"}},
		{"up", nil}, // checked below: runner_drain or runner_restart
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			w, u := newAgentUp(t, claude, `[runner]
drain = "1s"
heartbeat = "500ms"
pass_env = ["CLAUDE_CODE_MAX_RETRIES"]
[runs]
grace = "20s"`, "1")
			fm, a := w.fm, w.a
			a.must(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Work slowly", "state": "ready",
				"description": "Do the work. " + fakemodel.Marker("slow-work", "steps=6", "sleep=2")}, nil)

			// Mid-stage: the model has served the session two steps.
			a.await("the session in its second step", func() bool {
				for _, s := range fm.Sessions() {
					if s.Scenario == "slow-work" && s.Turns >= 2 {
						return true
					}
				}
				return false
			})
			disturbed := time.Now()
			switch c.name {
			case "drain":
				if err := u.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if err := u.wait(); err != nil {
					t.Fatalf("ballet up after SIGTERM: %v", err)
				}
				u = w.start(t)
			case "core":
				pid := u.nthPid(`^ballet up: Core started \(pid (\d+)\)`, 1)
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				u.line(`^ballet up: Core is back`)
			case "up": // kill -9 of ballet up: its children get SIGTERM
				orphan := u.nthPid(`^ballet up: runner started \(pid (\d+)\)`, 1)
				if err := u.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = u.wait()
				u = w.start(t)
				// The old runner drained alone; it ends once its finish is
				// answered by the new Core.
				defer a.await("the old runner (pid "+strconv.Itoa(orphan)+") gone", func() bool { return !alive(orphan) })
			case "runner":
				pid := u.nthPid(`^ballet up: runner started \(pid (\d+)\)`, 1)
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				u.line(`^ballet up: the runner stopped \(signal: killed\); starting it again`)
			}
			var f struct {
				Status    string
				Iteration int
				Waiting   string
			}
			a.await("the flow done", func() bool {
				a.must(200, "GET", "/api/v1/items/ACME-1/flow", nil, &f)
				if f.Status == "failed" || f.Waiting == "answer" {
					t.Fatalf("the flow ended %+v", f)
				}
				return f.Status == "done"
			})
			done := time.Since(disturbed)
			if f.Iteration != 1 {
				t.Errorf("the flow ended in iteration %d, want 1", f.Iteration)
			}
			var qs struct{ Questions []json.RawMessage }
			a.must(200, "GET", "/api/v1/items/ACME-1/questions", nil, &qs)
			if len(qs.Questions) != 0 {
				t.Errorf("questions on the ticket: %s", qs.Questions)
			}
			var runs struct {
				Runs []struct {
					ID, Stage, Status, Reason string
					Iteration                 int
				}
			}
			a.must(200, "GET", "/api/v1/items/ACME-1/runs", nil, &runs)
			var reasons []string
			for i, r := range runs.Runs {
				last := i == len(runs.Runs)-1
				switch {
				case r.Iteration != 1 || r.Stage != "implement":
					t.Errorf("run %d: stage %s iteration %d", i, r.Stage, r.Iteration)
				case last && r.Status != "succeeded":
					t.Errorf("the last run is %s, want succeeded", r.Status)
				case !last && r.Status != "interrupted":
					t.Errorf("run %d is %s (%s), want interrupted", i, r.Status, r.Reason)
				case !last:
					reasons = append(reasons, r.Reason)
				}
			}
			if c.name == "up" && len(reasons) == 1 && (reasons[0] == "runner_drain" || reasons[0] == "runner_restart") {
				c.reasons = reasons
			}
			if strings.Join(reasons, ",") != strings.Join(c.reasons, ",") {
				t.Errorf("interrupted runs' reasons %v, want %v (runs %+v)", reasons, c.reasons, runs.Runs)
			}
			t.Logf("%s: %d runs (interrupted: %v), done %s after the disturbance, %s in all",
				c.name, len(runs.Runs), reasons, done.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// testAPI calls Core's API as the platform admin.
type testAPI struct {
	t           *testing.T
	base, token string
}

func (a *testAPI) must(want int, method, path string, body, out any) {
	a.t.Helper()
	status, b := a.call(method, path, body)
	if status != want {
		a.t.Fatalf("%s %s: %d %s (want %d)", method, path, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// call sends one request and returns the answer's status and body.
func (a *testAPI) call(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// await polls cond until it holds, failing after upGuard (a hang, not a
// speed limit).
func (a *testAPI) await(what string, cond func() bool) {
	a.t.Helper()
	for deadline := time.Now().Add(upGuard); !cond(); {
		if time.Now().After(deadline) {
			a.t.Fatalf("waited %s for %s", upGuard, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestUpWaitsOutAProviderLimit: the fake model refuses the real
// claude-code for 20 s with 429 and retry-after: the ticket's run ends
// interrupted (provider_limit) with the provider's retry time, the flow
// waits for the provider, a second ticket on the same credential waits too
// instead of starting into the limit, and both end done in iteration 1 with
// no question once the limit has passed.
func TestUpWaitsOutAProviderLimit(t *testing.T) {
	t.Parallel()
	claude := agenttest.Claude(t)
	w, _ := newAgentUp(t, claude, `[runner]
heartbeat = "500ms"
pass_env = ["CLAUDE_CODE_MAX_RETRIES"]`, "0")
	a := w.a
	limit := fakemodel.Marker("rate-limit", "kind=rate", "retry_after=20", "for=20s")
	a.must(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Limited", "state": "ready",
		"description": "Do the work. " + limit}, nil)

	type flow struct {
		Status, Waiting, Until string
		Iteration              int
	}
	// get reads a ticket's flow; false before it started (404).
	get := func(key string, f *flow) bool {
		status, b := a.call("GET", "/api/v1/items/"+key+"/flow", nil)
		if status == 404 {
			return false
		}
		if status != 200 || json.Unmarshal(b, f) != nil {
			t.Fatalf("GET %s's flow: %d %s", key, status, b)
		}
		return true
	}
	var f flow
	a.await("the first ticket waiting for the provider", func() bool {
		if !get("ACME-1", &f) {
			return false
		}
		if f.Status == "failed" || f.Waiting == "answer" {
			t.Fatalf("the flow ended %+v", f)
		}
		return f.Waiting == "provider"
	})
	if f.Until == "" {
		t.Errorf("the flow waits for the provider with no time: %+v", f)
	}
	// A second ticket on the same credential does not start into the limit.
	a.must(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Second", "state": "ready",
		"description": "Do the work. " + limit}, nil)
	var g flow
	a.await("the second ticket waiting for the provider", func() bool {
		return get("ACME-2", &g) && g.Waiting == "provider"
	})
	var runs2 struct{ Runs []json.RawMessage }
	a.must(200, "GET", "/api/v1/items/ACME-2/runs", nil, &runs2)
	if len(runs2.Runs) != 0 {
		t.Errorf("the second ticket started %d runs into the limit", len(runs2.Runs))
	}
	for _, key := range []string{"ACME-1", "ACME-2"} {
		a.await(key+" done", func() bool {
			if !get(key, &f) {
				return false
			}
			if f.Status == "failed" || f.Waiting == "answer" {
				t.Fatalf("%s ended %+v", key, f)
			}
			return f.Status == "done"
		})
		if f.Iteration != 1 {
			t.Errorf("%s ended in iteration %d, want 1", key, f.Iteration)
		}
		var qs struct{ Questions []json.RawMessage }
		a.must(200, "GET", "/api/v1/items/"+key+"/questions", nil, &qs)
		if len(qs.Questions) != 0 {
			t.Errorf("questions on %s: %s", key, qs.Questions)
		}
	}
	var runs struct {
		Runs []struct {
			Status, Reason string
			RetryAt        string `json:"retry_at"`
		}
	}
	a.must(200, "GET", "/api/v1/items/ACME-1/runs", nil, &runs)
	if n := len(runs.Runs); n < 2 || runs.Runs[0].Status != "interrupted" || runs.Runs[0].Reason != "provider_limit" || runs.Runs[0].RetryAt == "" ||
		runs.Runs[n-1].Status != "succeeded" {
		t.Errorf("the first ticket's runs: %+v; want provider_limit with a retry time, then succeeded", runs.Runs)
	}
}

// agentUp is a `ballet up` in a folder of its own (outside /tmp: the
// sandbox gives sessions a private /tmp), running the real claude-code
// against an in-process fake model, with project ACME on a git repository
// and interruptPipeline published.
type agentUp struct {
	dir, addr, kaddr string
	env              []string
	fm               *fakemodel.Server
	a                *testAPI
}

// newAgentUp starts it with runner (the config's [runner] and [runs] keys
// beyond pass_env) and CLAUDE_CODE_MAX_RETRIES=retries.
func newAgentUp(t *testing.T, claude, runner, retries string) (*agentUp, *upProc) {
	t.Helper()
	w := &agentUp{fm: fakemodel.New()}
	srv := httptest.NewServer(w.fm)
	t.Cleanup(func() { w.fm.Close(); srv.Close() })
	dir, err := os.MkdirTemp("/var/tmp", "ballet-agent-up-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w.dir, w.addr, w.kaddr = dir, freeAddr(t), freeAddr(t)
	cfg := fmt.Sprintf(`[http]
addr = %q
[knowledge]
url = %q
[jobs]
poll = "50ms"
%s
[adapters.claude-code]
command = %q
model = "claude-sonnet-4-5"
[adapters.opencode]
command = %q
`, w.addr, "http://"+w.kaddr, runner, claude, filepath.Join(dir, "no-opencode"))
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "knowledge.toml"), []byte(fmt.Sprintf("[http]\naddr = %q\n", w.kaddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = []string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-test-fake-model", "CLAUDE_CODE_MAX_RETRIES=" + retries}
	u := w.start(t)
	boot, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	w.a = &testAPI{t: t, base: "http://" + w.addr, token: strings.TrimSpace(string(boot))}
	repo := apitest.NewGitRepo(t)
	w.a.must(201, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"}, nil)
	w.a.must(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": repo.Bare}}, nil)
	w.a.must(200, "PUT", "/api/v1/projects/ACME/pipelines/default", map[string]any{"version": 0, "yaml": interruptPipeline}, nil)
	return w, u
}

// start starts `ballet up` (again) and waits until it says Ballet is up.
func (w *agentUp) start(t *testing.T) *upProc {
	t.Helper()
	u := startUpIn(t, w.dir, w.addr, w.kaddr, w.env)
	u.line(`^ballet up: Ballet is up`)
	return u
}
