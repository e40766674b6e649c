//go:build linux

package runner_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runner"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/agenttest"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// The runner against the real Core: a whole Core as `ballet serve` runs it
// (apitest.RunOn: its HTTP server, the orchestrator, scheduler, reconciler
// and sweeper of silent runs; every event checked against the OpenAPI
// document) on a real store, the real CLIs
// against the fake model, a plain-git remote and the real bubblewrap. The
// fake-Core tests (session_test.go) prove the runner's side of each
// scenario in detail; these prove Core's: a ticket made ready is started
// by the scheduler, leased with its session, and what the session did —
// report, question, usage, log, cancellation, a runner's death — lands on
// the run, the flow and the ticket.

// coreWorld is a world whose Core is the real one, with organization acme
// and project ACME on the world's remote, and a runner token.
type coreWorld struct {
	*world
	e     *apitest.Env
	token string
}

// newCoreWorld starts Core on s (a fresh SQLite file when nil); adjust may
// change its configuration.
func newCoreWorld(t testing.TB, s store.Store, adjust ...func(*config.Config)) *coreWorld {
	t.Helper()
	w := &coreWorld{world: newWorld(t)}
	if s == nil {
		s = storetest.Open(t, "sqlite")
	}
	dir := t.TempDir()
	w.e = apitest.RunOn(t, s, nil, append([]func(*config.Config){func(c *config.Config) {
		c.Jobs.Poll.Duration = 20 * time.Millisecond
		c.Storage.Path = filepath.Join(dir, "core.db") // the git mirror cache lives next to it
		// The runner heartbeats its runs every 200 ms (testTiming); the
		// grace allows for a loaded machine (a huge line starves it).
		c.Runs.Grace.Duration = 6 * time.Second
	}}, adjust...)...)
	w.e.Org("acme")
	w.e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": w.remote.url, "default_branch": "main"}})
	var tok struct{ Token string }
	w.e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "runner", "kind": "runner"}).JSON(t, &tok)
	w.token = tok.Token
	return w
}

// in returns the world for subtest t: its helpers fail t.
func (w *coreWorld) in(t *testing.T) *coreWorld {
	wt, e := *w.world, *w.e
	wt.t, e.T = t, t
	return &coreWorld{world: &wt, e: &e, token: w.token}
}

// options are a runner's options for this world's Core.
func (w *coreWorld) options() runner.Options {
	o := w.world.options()
	o.Config.Server, o.Token = w.e.URL, w.token
	o.Adapters.ClaudeCode.Model = model // for the template's stages, which name none
	return o
}

// oneStage publishes, as pipeline name of ACME, one agent stage implement
// run by adapter, whose outcomes lead where the template's implement's do
// except done, which ends the flow.
func (w *coreWorld) oneStage(name, adapter string) {
	w.t.Helper()
	w.e.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/"+name, map[string]any{"version": 0, "definition": map[string]any{
		"stages": []any{map[string]any{"id": "implement", "kind": "agent", "adapter": adapter, "model": model,
			"instructions": "Implement the ticket.", "next": map[string]any{"done": "$done", "failed": "$question", "blocked": "$question"}}}}})
}

// pipelineOf is the ticket type whose pipeline runs on adapter: task
// (the default pipeline) on claude-code, bug on opencode (see oneStage).
func pipelineOf(adapter string) string {
	if adapter == runproto.OpenCode {
		return "bug"
	}
	return "task"
}

// ticket creates a ready ticket of typ whose description carries marker
// and returns its key; the scheduler starts it.
func (w *coreWorld) ticket(typ, marker string) string {
	w.t.Helper()
	var it struct{ Key string }
	w.e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": typ, "title": "Add a health endpoint",
		"description": "Add GET /health.\n" + marker, "acceptance_criteria": "GET /health answers 200", "state": "ready"}).JSON(w.t, &it)
	return it.Key
}

type coreFlow struct {
	Ticket, Stage, Status, Waiting, Run, Outcome, Report string
	Iteration                                            int
}

// flow reads key's flow (the zero flow before the scheduler started it).
func (w *coreWorld) flow(key string) coreFlow {
	w.t.Helper()
	var f coreFlow
	r := w.e.Do(apitest.BootstrapToken, "GET", "/api/v1/items/"+key+"/flow", nil)
	switch r.Status {
	case 404:
	case 200:
		r.JSON(w.t, &f)
	default:
		w.t.Fatalf("GET the flow of %s: %d %s", key, r.Status, r.Body)
	}
	return f
}

// ended: the flow is over, or waits for an answer (call it once the run
// that decides has ended).
func ended(f coreFlow) bool {
	return f.Status == "done" || f.Status == "failed" || f.Waiting == "answer"
}

// await polls key's flow until cond holds (failing after the hang guard).
func (w *coreWorld) await(key, what string, cond func(coreFlow) bool) coreFlow {
	w.t.Helper()
	var f coreFlow
	waitFor(w.t, key+": "+what, func() bool { f = w.flow(key); return cond(f) })
	return f
}

type coreRun struct {
	ID, Stage, Status, Outcome, Report, Error, Reason string
	Iteration                                         int
	BlockingQuestion                                  bool `json:"blocking_question"`
	ExitStatus                                        *int `json:"exit_status"`
	Usage                                             runproto.Usage
	CancelRequested                                   bool `json:"cancel_requested"`
}

// runs lists key's runs, oldest first.
func (w *coreWorld) runs(key string) []coreRun {
	w.t.Helper()
	var l struct{ Runs []coreRun }
	w.e.Admin(200, "GET", "/api/v1/items/"+key+"/runs", nil).JSON(w.t, &l)
	return l.Runs
}

// nthRun waits for key's n-th run (1-based) to exist and returns it.
func (w *coreWorld) nthRun(key string, n int) coreRun {
	w.t.Helper()
	var r coreRun
	waitFor(w.t, fmt.Sprintf("%s's run %d", key, n), func() bool {
		rs := w.runs(key)
		if len(rs) >= n {
			r = rs[n-1]
		}
		return len(rs) >= n
	})
	return r
}

// final waits until key's n-th run has ended and returns it.
func (w *coreWorld) final(key string, n int) coreRun {
	w.t.Helper()
	var r coreRun
	waitFor(w.t, fmt.Sprintf("%s's run %d to end", key, n), func() bool {
		rs := w.runs(key)
		if len(rs) >= n {
			r = rs[n-1]
		}
		return len(rs) >= n && (r.Status == "succeeded" || r.Status == "failed" || r.Status == "cancelled" || r.Status == "interrupted")
	})
	return r
}

// runLog reads run's whole log through GET /runs/{run}/log, page by page,
// once the run has finished; it returns the log and its truncation mark.
func (w *coreWorld) runLog(runID string) (string, bool) {
	w.t.Helper()
	var b strings.Builder
	for offset := int64(0); ; {
		var p struct {
			NextOffset          int64 `json:"next_offset"`
			Data                string
			Truncated, Finished bool
		}
		w.e.Admin(200, "GET", "/api/v1/runs/"+runID+"/log?offset="+fmt.Sprint(offset), nil).JSON(w.t, &p)
		b.WriteString(p.Data)
		if p.NextOffset == offset {
			return b.String(), p.Truncated
		}
		offset = p.NextOffset
	}
}

// question is an item's question.
type question struct {
	ID, Text string
	Blocking bool
	Answer   *string
	AskedBy  struct{ Kind, Subject string } `json:"asked_by"`
}

// openQuestion returns key's one open blocking question.
func (w *coreWorld) openQuestion(key string) question {
	w.t.Helper()
	var qs struct{ Questions []question }
	w.e.Admin(200, "GET", "/api/v1/items/"+key+"/questions", nil).JSON(w.t, &qs)
	var open []question
	for _, q := range qs.Questions {
		if q.Blocking && q.Answer == nil {
			open = append(open, q)
		}
	}
	if len(open) != 1 {
		w.t.Fatalf("%s has %d open blocking questions: %+v", key, len(open), qs.Questions)
	}
	return open[0]
}

func (w *coreWorld) answer(q question, answer string) {
	w.t.Helper()
	w.e.Admin(200, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": answer})
}

// patchItem changes key's fields (as a person does), sending the version
// it read.
func (w *coreWorld) patchItem(key string, fields map[string]any) {
	w.t.Helper()
	var it struct{ Version int64 }
	w.e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(w.t, &it)
	fields["version"] = it.Version
	w.e.Admin(200, "PATCH", "/api/v1/items/"+key, fields)
}

// servedTagged returns the fake model's sessions whose marker carries
// tag=tag, in order of first request.
func (w *coreWorld) servedTagged(tag string) []fakemodel.Session {
	var out []fakemodel.Session
	for _, s := range w.served() {
		if s.Params["tag"] == tag {
			out = append(out, s)
		}
	}
	return out
}

// workFile is a file of run's workspace while its session runs.
func (w *coreWorld) workFile(runID, name string) string {
	return filepath.Join(w.root, "runner", "runs", runID, "work", name)
}

// midWork waits until key's n-th run has leased a slow-work session that
// wrote its first step into the workspace, and returns the run.
func (w *coreWorld) midWork(key string, n int) coreRun {
	w.t.Helper()
	r := w.nthRun(key, n)
	waitFor(w.t, key+": the first step of work", func() bool {
		b, _ := os.ReadFile(w.workFile(r.ID, "work.txt"))
		return string(b) == "step 1\n"
	})
	return r
}

// noSessionLeft waits until nothing of run's session runs any more.
func noSessionLeft(t *testing.T, runID string) {
	t.Helper()
	waitFor(t, "the session's processes to end", func() bool { return len(sessionProcs(runID)) == 0 })
}

// TestRealCore runs the scenarios against the real Core, many tickets at
// once through one runner: a report done (both CLIs), failed, blocked, a
// blocking question and its answer (both CLIs), no report, a model API
// error, a huge output line and a ticket paused mid-session.
func TestRealCore(t *testing.T) {
	t.Parallel()
	w := newCoreWorld(t, nil, func(c *config.Config) { c.Runs.LogLimit = 1 << 20 })
	w.oneStage("default", runproto.ClaudeCode)
	w.oneStage("bug", runproto.OpenCode)
	o := w.options()
	o.Config.Sessions = 4
	w.start(o)

	// Each done: the branch ballet/<KEY> holds the change, the run the
	// usage the model served and its cost, the ticket's budget that spend,
	// Core the session's output; the stage's checkpoint is dropped.
	for _, cli := range bothCLIs {
		t.Run("done/"+cli, func(t *testing.T) {
			t.Parallel()
			agenttest.ByName(cli).Path(t)
			w := w.in(t)
			tag := "done-" + cli
			key := w.ticket(pipelineOf(cli), fakemodel.Marker("report-done", "content="+tag, "tag="+tag))
			f := w.await(key, "done", ended)
			r := w.final(key, 1)
			if f.Status != "done" || r.Status != "succeeded" || r.Outcome != "done" || r.Error != "" || r.ExitStatus == nil || *r.ExitStatus != 0 {
				t.Fatalf("flow %+v, run %+v", f, r)
			}
			served := w.servedTagged(tag)
			if len(served) != 1 {
				t.Fatalf("the model served %d sessions", len(served))
			}
			wantCoreUsage(t, r.Usage, served[0])
			var spent struct {
				SpentUSD    float64 `json:"spent_usd"`
				InputTokens int64   `json:"input_tokens"`
				Runs        int
			}
			w.e.Admin(200, "GET", "/api/v1/items/"+key+"/budget", nil).JSON(t, &spent)
			if math.Abs(spent.SpentUSD-r.Usage.CostUSD) > 1e-9 || spent.InputTokens != r.Usage.InputTokens || spent.Runs != 1 {
				t.Errorf("the ticket's budget %+v; the run %+v", spent, r.Usage)
			}
			head := w.remote.ref("refs/heads/ballet/" + key)
			if got := w.remote.show(head, "hello.txt"); got != tag+"\n" {
				t.Errorf("hello.txt on the branch %q: %q", head, got)
			}
			log, truncated := w.runLog(r.ID)
			if !strings.Contains(log, "submit_report") || truncated {
				t.Errorf("Core's log of the run (truncated %v) lacks the session's output: %.2000s", truncated, log)
			}
			waitFor(t, "the checkpoint to be dropped", func() bool { return w.remote.ref("refs/ballet/checkpoints/"+key+"/implement") == "" })
			noSessionLeft(t, r.ID)
		})
	}

	// Failed and blocked end the stage with that outcome; by the pipeline
	// Core asks how to go on. Nothing changed, nothing is pushed.
	for _, outcome := range []string{"failed", "blocked"} {
		t.Run(outcome, func(t *testing.T) {
			t.Parallel()
			w := w.in(t)
			key := w.ticket("task", fakemodel.Marker("report-"+outcome, "tag="+outcome))
			f := w.await(key, "a question", ended)
			r := w.final(key, 1)
			if f.Waiting != "answer" || r.Status != "succeeded" || r.Outcome != outcome {
				t.Fatalf("flow %+v, run %+v", f, r)
			}
			if q := w.openQuestion(key); !strings.Contains(q.Text, "stage implement ended "+outcome) || !strings.Contains(q.Text, r.Report) || q.AskedBy.Kind != "system" {
				t.Errorf("Core's question %+v", q)
			}
			wantCoreUsage(t, r.Usage, w.servedTagged(outcome)[0])
			if c := w.remote.ref("refs/heads/ballet/" + key); c != "" {
				t.Errorf("the branch was pushed: %s", c)
			}
		})
	}

	// A blocking question asked through Core's MCP endpoint holds the flow;
	// answered through the API, the same stage runs again with the answer
	// in its prompt and reports done with it.
	for _, cli := range bothCLIs {
		t.Run("question/"+cli, func(t *testing.T) {
			t.Parallel()
			agenttest.ByName(cli).Path(t)
			w := w.in(t)
			tag := "question-" + cli
			key := w.ticket(pipelineOf(cli), fakemodel.Marker("ask", "question=Which_colour?", "answer=teal", "tag="+tag))
			f := w.await(key, "the question", ended)
			first := w.final(key, 1)
			q := w.openQuestion(key)
			if f.Waiting != "answer" || !first.BlockingQuestion || q.Text != "Which colour?" || q.AskedBy.Subject != "run:"+first.ID {
				t.Fatalf("flow %+v, first run %+v, question %+v", f, first, q)
			}
			if first.Status != "failed" || !strings.Contains(first.Error, "without submit_report") {
				t.Errorf("the first run: %+v", first)
			}
			w.answer(q, "teal")
			second := w.final(key, 2)
			f = w.await(key, "done", ended)
			if f.Status != "done" || second.Stage != "implement" || second.Status != "succeeded" || second.Report != "Done as answered: teal" {
				t.Fatalf("flow %+v, second run %+v", f, second)
			}
			if served := w.servedTagged(tag); len(served) != 2 {
				t.Errorf("the model served %d sessions, want 2", len(served))
			}
		})
	}

	// A session that ends without submit_report has failed: Core asks how
	// to go on, and the work waits in the stage's checkpoint.
	t.Run("no report", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		key := w.ticket("task", fakemodel.Marker("no-report", "tag=no-report"))
		f := w.await(key, "a question", ended)
		r := w.final(key, 1)
		if f.Waiting != "answer" || r.Status != "failed" || !strings.Contains(r.Error, "the session ended without submit_report") {
			t.Fatalf("flow %+v, run %+v", f, r)
		}
		if q := w.openQuestion(key); !strings.Contains(q.Text, "without submit_report") {
			t.Errorf("Core's question %q does not say why", q.Text)
		}
		c := w.remote.ref("refs/ballet/checkpoints/" + key + "/implement")
		if c == "" || w.remote.show(c, "hello.txt") != "hello from the fake model\n" {
			t.Errorf("the checkpoint %q does not keep the session's work", c)
		}
	})

	// A model API error (not a provider's limit) fails the run with the
	// CLI's own message.
	t.Run("api error", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		key := w.ticket("task", fakemodel.Marker("api-error", "status=500", "type=api_error", "tag=api-error"))
		r := w.final(key, 1)
		if r.Status != "failed" || r.ExitStatus == nil || *r.ExitStatus != 1 || !strings.Contains(r.Error, "claude-code: API Error") {
			t.Fatalf("run %+v", r)
		}
		w.await(key, "a question", func(f coreFlow) bool { return f.Waiting == "answer" })
	})

	// A line of 20 MB comes through; Core keeps the log up to its limit
	// (1 MiB here) and marks the cut.
	t.Run("huge line", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		key := w.ticket("task", fakemodel.Marker("huge-line", "size=20000000", "tag=huge"))
		r := w.final(key, 1)
		if r.Status != "succeeded" || r.Outcome != "done" {
			t.Fatalf("run %+v", r)
		}
		log, truncated := w.runLog(r.ID)
		if !truncated || len(log) != 1<<20 {
			t.Errorf("Core's log: %d bytes, truncated %v; want 1 MiB, truncated", len(log), truncated)
		}
		wantCoreUsage(t, r.Usage, w.servedTagged("huge")[0])
	})

	// A ticket paused mid-session: Core stops the flow and asks the run to
	// stop; the runner learns it from its heartbeat and stops the session
	// at once, finishing the run cancelled with its usage so far; the work
	// done is kept in the stage's checkpoint, nothing is pushed.
	t.Run("ticket paused", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		key := w.ticket("task", fakemodel.Marker("slow-work", "steps=3", "sleep=600", "tag=paused"))
		r := w.midWork(key, 1)
		w.patchItem(key, map[string]any{"state": "paused"})
		r = w.final(key, 1)
		if r.Status != "cancelled" || !r.CancelRequested || r.Error != "the flow stopped" {
			t.Fatalf("run %+v", r)
		}
		// Its tokens cost what they cost, on the run and in the ticket's
		// budget (issue 23: a cancelled run showed $0.00).
		u := fakemodel.Usage{Input: r.Usage.InputTokens, Output: r.Usage.OutputTokens, CacheRead: r.Usage.CacheReadTokens, CacheWrite: r.Usage.CacheWriteTokens}
		if want := roundMicro(listCost(u)); r.Usage.InputTokens == 0 || r.Usage.CostUSD <= 0 || math.Abs(r.Usage.CostUSD-want) > 1e-9 {
			t.Errorf("the cancelled run's usage %+v costs $%.6f; its tokens at the list prices make $%.6f", u, r.Usage.CostUSD, want)
		}
		var spent struct {
			SpentUSD    float64 `json:"spent_usd"`
			InputTokens int64   `json:"input_tokens"`
			Runs        int
		}
		w.e.Admin(200, "GET", "/api/v1/items/"+key+"/budget", nil).JSON(t, &spent)
		if spent.SpentUSD <= 0 || math.Abs(spent.SpentUSD-r.Usage.CostUSD) > 1e-9 || spent.InputTokens != r.Usage.InputTokens || spent.Runs != 1 {
			t.Errorf("the ticket's budget %+v; the cancelled run %+v", spent, r.Usage)
		}
		if f := w.flow(key); f.Status != "stopped" {
			t.Errorf("flow %+v", f)
		}
		noSessionLeft(t, r.ID)
		c := w.remote.ref("refs/ballet/checkpoints/" + key + "/implement")
		if c == "" || w.remote.show(c, "work.txt") != "step 1\n" {
			t.Errorf("the checkpoint %q does not keep the work done", c)
		}
		if c := w.remote.ref("refs/heads/ballet/" + key); c != "" {
			t.Errorf("the branch was pushed: %s", c)
		}
	})
}

// A model that never answers: the runner's watchdog stops the session and
// Core fails the run saying so.
func TestRealCoreWatchdog(t *testing.T) {
	t.Parallel()
	w := newCoreWorld(t, nil)
	w.oneStage("default", runproto.ClaudeCode)
	o := w.options()
	o.Config.Watchdog.Duration = 3 * time.Second
	w.start(o)
	key := w.ticket("task", fakemodel.Marker("hang", "at=mid"))
	r := w.final(key, 1)
	if r.Status != "failed" || !strings.Contains(r.Error, "stopped by the watchdog: no output for 3s") {
		t.Fatalf("run %+v", r)
	}
	w.await(key, "a question", func(f coreFlow) bool { return f.Waiting == "answer" })
	noSessionLeft(t, r.ID)
}

// The kill switch mid-session: Core interrupts the running run and the flow
// waits for the pause to end; the runner stops the session, keeping its
// work in the stage's checkpoint. Released, the flow runs the stage again
// in a new session, which starts from the checkpoint, is told so, and
// publishes the earlier work with its own.
func TestRealCoreKillSwitch(t *testing.T) {
	t.Parallel()
	w := newCoreWorld(t, nil)
	w.oneStage("default", runproto.ClaudeCode)
	w.start(w.options())
	key := w.ticket("task", fakemodel.Marker("slow-work", "steps=3", "sleep=600"))
	first := w.midWork(key, 1)
	w.e.Admin(200, "POST", "/api/v1/platform/pause", nil)
	first = w.final(key, 1)
	if first.Status != "interrupted" || first.Reason != "kill_switch" {
		t.Fatalf("the first run: %+v", first)
	}
	w.await(key, "the pause", func(f coreFlow) bool { return f.Waiting == "pause" })
	waitFor(t, "the checkpoint of the first step", func() bool {
		c := w.remote.ref("refs/ballet/checkpoints/" + key + "/implement")
		return c != "" && w.remote.show(c, "work.txt") == "step 1\n"
	})
	noSessionLeft(t, first.ID)

	// The next session plays another scenario (a person edited the ticket
	// meanwhile): it writes hello.txt and reports done.
	w.patchItem(key, map[string]any{"description": "Add GET /health.\n" + fakemodel.Marker("report-done")})
	w.e.Admin(200, "POST", "/api/v1/platform/resume", nil)
	second := w.final(key, 2)
	f := w.await(key, "done", ended)
	if f.Status != "done" || second.Status != "succeeded" || second.Stage != "implement" {
		t.Fatalf("flow %+v, second run %+v", f, second)
	}
	if !strings.Contains(w.prompts(), "You are continuing from a checkpoint") {
		t.Error("the second session's prompt does not say it continues from a checkpoint")
	}
	head := w.remote.ref("refs/heads/ballet/" + key)
	if files := w.remote.files(head); !slices.Equal(files, []string{"README", "hello.txt", "work.txt"}) {
		t.Errorf("the branch holds %q: want the checkpoint's work and the new", files)
	}
	waitFor(t, "the checkpoint to be dropped", func() bool { return w.remote.ref("refs/ballet/checkpoints/"+key+"/implement") == "" })
}

// The runner process is SIGKILLed mid-session, after a checkpoint: its
// session dies with it (bwrap). Started again, the runner registers under
// the same identity naming no session, and Core ends the run interrupted
// (runner_restart) at once, without waiting for [runs] grace: the stage
// runs again from the checkpoint, in the same iteration, without a
// question, and the ticket ends done.
func TestRealCoreRunnerKilled(t *testing.T) {
	t.Parallel()
	// A grace longer than the test: only the registration can end the run.
	w := newCoreWorld(t, nil, func(c *config.Config) { c.Runs.Grace.Duration = time.Hour })
	w.oneStage("default", runproto.ClaudeCode)
	o := w.options()
	o.Config.Checkpoint.Duration = 500 * time.Millisecond
	child := w.startChild(o)
	key := w.ticket("task", fakemodel.Marker("slow-work", "steps=3", "sleep=600"))
	first := w.midWork(key, 1)
	waitFor(t, "a checkpoint of the first step", func() bool {
		c := w.remote.ref("refs/ballet/checkpoints/" + key + "/implement")
		return c != "" && w.remote.show(c, "work.txt") == "step 1\n"
	})
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	noSessionLeft(t, first.ID)

	// The next session plays another scenario (a person edited the ticket
	// meanwhile): it writes hello.txt and reports done.
	w.patchItem(key, map[string]any{"description": "Add GET /health.\n" + fakemodel.Marker("report-done")})
	w.start(o)
	first = w.final(key, 1)
	if first.Status != "interrupted" || first.Reason != "runner_restart" {
		t.Fatalf("the run of the killed runner: %+v", first)
	}
	second := w.final(key, 2)
	f := w.await(key, "done", ended)
	if f.Status != "done" || second.Status != "succeeded" || second.Iteration != 1 || second.Stage != "implement" {
		t.Fatalf("flow %+v, second run %+v", f, second)
	}
	var qs struct{ Questions []question }
	w.e.Admin(200, "GET", "/api/v1/items/"+key+"/questions", nil).JSON(t, &qs)
	if len(qs.Questions) != 0 {
		t.Errorf("questions %+v: an interruption asks none", qs.Questions)
	}
	if !strings.Contains(w.prompts(), "You are continuing from a checkpoint") {
		t.Error("the second session's prompt does not say it continues from a checkpoint")
	}
	head := w.remote.ref("refs/heads/ballet/" + key)
	if files := w.remote.files(head); !slices.Equal(files, []string{"README", "hello.txt", "work.txt"}) {
		t.Errorf("the branch holds %q: want the checkpoint's work and the new", files)
	}
}

// The runner process gets SIGTERM mid-session (as `ballet up` stops it):
// it drains, and once [runner] drain runs out stops the session, keeps its
// work in the checkpoint and finishes the run interrupted (runner_drain).
// Started again, the stage runs again from the checkpoint in iteration 1,
// without a question, and the ticket ends done.
func TestRealCoreRunnerDrained(t *testing.T) {
	t.Parallel()
	w := newCoreWorld(t, nil, func(c *config.Config) { c.Runs.Grace.Duration = time.Hour })
	w.oneStage("default", runproto.ClaudeCode)
	o := w.options()
	o.Config.Checkpoint.Duration = 500 * time.Millisecond
	o.Config.Drain.Duration = time.Second
	child := w.startChild(o)
	key := w.ticket("task", fakemodel.Marker("slow-work", "steps=3", "sleep=600"))
	first := w.midWork(key, 1)
	// The next session plays another scenario (a person edited the ticket
	// meanwhile; the drained run's stage runs again at once, with the
	// ticket as it is then): it writes hello.txt and reports done.
	w.patchItem(key, map[string]any{"description": "Add GET /health.\n" + fakemodel.Marker("report-done")})
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Errorf("the drained runner exited with %v", err)
	}
	noSessionLeft(t, first.ID)
	first = w.final(key, 1)
	if first.Status != "interrupted" || first.Reason != "runner_drain" || !strings.Contains(first.Error, "drain time (1s) ran out") {
		t.Fatalf("the drained run: %+v", first)
	}
	w.start(o)
	second := w.final(key, 2)
	f := w.await(key, "done", ended)
	if f.Status != "done" || second.Status != "succeeded" || second.Iteration != 1 {
		t.Fatalf("flow %+v, second run %+v", f, second)
	}
	var qs struct{ Questions []question }
	w.e.Admin(200, "GET", "/api/v1/items/"+key+"/questions", nil).JSON(t, &qs)
	if len(qs.Questions) != 0 {
		t.Errorf("questions %+v: an interruption asks none", qs.Questions)
	}
	if !strings.Contains(w.prompts(), "You are continuing from a checkpoint") {
		t.Error("the second session's prompt does not say it continues from a checkpoint")
	}
}

// wantCoreUsage checks that the usage on a run is exactly what the fake
// model served the session, and its cost the list prices of it, kept to
// the millionth of a dollar as Core keeps it.
func wantCoreUsage(t *testing.T, got runproto.Usage, served fakemodel.Session) {
	t.Helper()
	if want := roundMicro(listCost(served.Usage)); math.Abs(got.CostUSD-want) > 1e-9 {
		t.Errorf("the run's cost $%.6f, the list prices make $%.6f", got.CostUSD, want)
	}
	got.CostUSD = listCost(served.Usage)
	wantUsage(t, &got, served)
}

// roundMicro rounds a cost to the millionth of a dollar Core keeps.
func roundMicro(usd float64) float64 { return math.Round(usd*1e6) / 1e6 }

// TestTemplatePipelineRealSessions takes a ticket through Ballet's
// template pipeline — implement → review → verify → integrate — on SQLite
// and on rqlite, each agent stage a real claude-code session against the
// fake model (its default scenario: write hello-<KEY>.txt, report done): the
// implement session's change is pushed to ballet/<KEY>, the later stages
// change nothing and push nothing, the merge stage waits for a person,
// who merges the plain-git branch; the ticket ends done. Each run carries
// the usage the model served and its cost, the budget rollups add them
// up, and the ticket's history shows every stage.
func TestTemplatePipelineRealSessions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newCoreWorld(t, s)
		w.start(w.options())
		key := w.ticket("task", "Write the greeting.")
		f := w.await(key, "the merge", func(f coreFlow) bool { return f.Waiting == "merge" || ended(f) })
		if f.Stage != "integrate" || f.Status != "waiting" || f.Waiting != "merge" {
			t.Fatalf("flow %+v", f)
		}
		branch := "ballet/" + key
		head := w.remote.ref("refs/heads/" + branch)
		if got := w.remote.show(head, "hello-"+key+".txt"); got != "hello from the fake model for "+key+"\n" {
			t.Fatalf("hello-%s.txt on %s: %q", key, branch, got)
		}
		if n := git(t, w.remote.work, "--git-dir="+w.remote.url, "rev-list", "--count", "main.."+head); n != "1" {
			t.Errorf("%s has %s commits beyond main; want the implement session's one", branch, n)
		}

		// A person merges the branch and deletes it.
		git(t, w.remote.work, "fetch", "--quiet", w.remote.url, branch)
		git(t, w.remote.work, "merge", "--quiet", "--no-ff", "-m", "Merge "+branch, "FETCH_HEAD")
		git(t, w.remote.work, "push", "--quiet", w.remote.url, "HEAD:refs/heads/main", ":refs/heads/"+branch)
		f = w.await(key, "done", func(f coreFlow) bool { return f.Status == "done" || f.Status == "failed" })
		if f.Status != "done" || f.Outcome != "done" || !strings.Contains(f.Report, "merged") {
			t.Fatalf("flow %+v", f)
		}
		var it struct{ State string }
		w.e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &it)
		if it.State != "done" {
			t.Errorf("the ticket is %s", it.State)
		}

		runs := w.runs(key)
		served := w.served()
		if len(runs) != 3 || len(served) != 3 {
			t.Fatalf("%d runs, %d sessions served: %+v", len(runs), len(served), runs)
		}
		var spent runproto.Usage
		var micro float64
		for i, stage := range []string{"implement", "review", "verify"} {
			r := runs[i]
			if r.Stage != stage || r.Status != "succeeded" || r.Outcome != "done" {
				t.Errorf("run %d: %+v", i+1, r)
			}
			wantCoreUsage(t, r.Usage, served[i])
			spent.InputTokens += r.Usage.InputTokens
			spent.OutputTokens += r.Usage.OutputTokens
			micro += r.Usage.CostUSD
		}
		type amount struct {
			SpentUSD     float64 `json:"spent_usd"`
			InputTokens  int64   `json:"input_tokens"`
			OutputTokens int64   `json:"output_tokens"`
			Runs         int
		}
		var ticket amount
		w.e.Admin(200, "GET", "/api/v1/items/"+key+"/budget", nil).JSON(t, &ticket)
		var project struct{ Today amount }
		w.e.Admin(200, "GET", "/api/v1/projects/ACME/budget", nil).JSON(t, &project)
		want := amount{SpentUSD: roundMicro(micro), InputTokens: spent.InputTokens, OutputTokens: spent.OutputTokens, Runs: 3}
		for name, got := range map[string]amount{"ticket": ticket, "project's today": project.Today} {
			if math.Abs(got.SpentUSD-want.SpentUSD) > 1e-9 || got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens || got.Runs != want.Runs {
				t.Errorf("the %s budget rollup %+v; the runs add up to %+v", name, got, want)
			}
		}

		var evs struct {
			Events []struct {
				Type    string
				Payload struct{ Stage string }
			}
		}
		w.e.Admin(200, "GET", "/api/v1/items/"+key+"/events?limit=1000", nil).JSON(t, &evs)
		var stages []string
		for _, e := range evs.Events {
			if e.Type == "flow.stage_started" {
				stages = append(stages, e.Payload.Stage)
			}
		}
		if !slices.Equal(stages, []string{"implement", "review", "verify", "integrate"}) || evs.Events[len(evs.Events)-1].Type != "ticket.state_changed" && evs.Events[len(evs.Events)-1].Type != "flow.done" {
			t.Errorf("the ticket's history starts stages %q, ends with %s", stages, evs.Events[len(evs.Events)-1].Type)
		}
	})
}
