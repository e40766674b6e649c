package apitest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// flowWorld is a Core running its jobs, an org with a project on a real
// plain-git repository, and a runner.
type flowWorld struct {
	*apitest.Env
	repo   *apitest.GitRepo
	runner *apitest.Runner
	n      int
}

func newFlowWorld(t *testing.T, s store.Store, adjust ...func(*config.Config)) *flowWorld {
	repo := apitest.NewGitRepo(t)
	dir := t.TempDir()
	e := apitest.New(t, s, append([]func(*config.Config){func(c *config.Config) {
		c.Jobs.Poll.Duration = 20 * time.Millisecond
		c.Storage.Path = dir + "/core.db" // the git mirror cache lives next to it
	}}, adjust...)...)
	e.StartJobs()
	e.Org("acme")
	e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": repo.Bare, "default_branch": "main"}})
	return &flowWorld{Env: e, repo: repo, runner: e.NewRunner("r1")}
}

// ticket creates a ready ticket of a type and returns its key.
func (w *flowWorld) ticket(typ string) string {
	w.n++
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": typ, "title": fmt.Sprintf("ticket %d", w.n),
		"acceptance_criteria": "it works", "state": "ready"}).JSON(w.T, &it)
	return it.Key
}

type flowView struct {
	Ticket, Pipeline, Stage, Status, Waiting, Run, Outcome, Report string
	PipelineVersion                                                int64 `json:"pipeline_version"`
	Iteration                                                      int
	MaxIterations                                                  int `json:"max_iterations"`
	Version                                                        int64
}

func (w *flowWorld) flow(key string) flowView {
	w.T.Helper()
	var f flowView
	w.Admin(200, "GET", "/api/v1/items/"+key+"/flow", nil).JSON(w.T, &f)
	return f
}

// await polls the flow until cond holds (failing after the hang guard).
func (w *flowWorld) await(key, what string, cond func(f flowView) bool) flowView {
	w.T.Helper()
	deadline := time.Now().Add(apitest.HangGuard)
	for {
		f := w.flow(key)
		if cond(f) {
			return f
		}
		if time.Now().After(deadline) {
			w.T.Fatalf("%s: gave up waiting for %s; flow is %+v", key, what, f)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *flowWorld) itemState(key string) string {
	var it struct{ State string }
	w.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(w.T, &it)
	return it.State
}

// leaseStage leases the next run and checks its stage and iteration.
func (w *flowWorld) leaseStage(key, stage string, iteration int) apitest.LeasedRun {
	w.T.Helper()
	r := w.runner.MustLease()
	if r.Item != key || r.Stage != stage || r.Iteration != iteration {
		w.T.Fatalf("leased %s/%s iteration %d, want %s/%s iteration %d", r.Item, r.Stage, r.Iteration, key, stage, iteration)
	}
	return r
}

func (w *flowWorld) answerOpen(key, answer string) {
	w.T.Helper()
	var qs struct {
		Questions []struct {
			ID       string
			Blocking bool
			Answer   *string
		}
	}
	w.Admin(200, "GET", "/api/v1/items/"+key+"/questions", nil).JSON(w.T, &qs)
	n := 0
	for _, q := range qs.Questions {
		if q.Blocking && q.Answer == nil {
			w.Admin(200, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": answer})
			n++
		}
	}
	if n == 0 {
		w.T.Fatalf("%s has no open blocking question", key)
	}
}

func (w *flowWorld) flowEvents(key string) []string {
	var evs struct {
		Events []struct{ Type string }
	}
	w.Admin(200, "GET", "/api/v1/items/"+key+"/events?limit=1000", nil).JSON(w.T, &evs)
	var out []string
	for _, e := range evs.Events {
		out = append(out, e.Type)
	}
	return out
}

// TestTemplatePipelineEndToEnd drives the spec's template pipeline through
// the REST API with a runner that uses the runner API: done → next, failed
// → back to implement (a new iteration, with the report handed over), a
// plain-git merge by a human, and the ticket done.
func TestTemplatePipelineEndToEnd(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		key := w.ticket("task")
		w.Admin(404, "GET", "/api/v1/items/"+key+"/flow", nil) // not started yet
		raw := w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil).Map(t)
		fields := make([]string, 0, len(raw))
		for k := range raw {
			fields = append(fields, k)
		}
		sort.Strings(fields)
		if got := strings.Join(fields, ","); got != "iteration,max_iterations,pipeline,pipeline_version,stage,stages,started_at,status,ticket,updated_at,version" {
			t.Fatalf("flow fields: %s", got)
		}
		if raw["pipeline"] != "default" || raw["pipeline_version"] != 0.0 || raw["stage"] != "implement" || raw["max_iterations"] != 3.0 {
			t.Fatalf("started flow %v", raw)
		}
		w.Admin(409, "POST", "/api/v1/items/"+key+"/flow/start", nil) // active already
		if st := w.itemState(key); st != "in_progress" {
			t.Fatalf("ticket %s after start", st)
		}

		w.Admin(201, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "go-style", "description": "How we write Go", "content": "Use gofmt."})
		r := w.leaseStage(key, "implement", 1)
		var skills struct {
			Skills []struct{ Name, Content string }
		}
		w.Must(200, r.Token, "GET", "/api/v1/runs/"+r.ID+"/skills", nil).JSON(t, &skills)
		if len(skills.Skills) != 1 || skills.Skills[0].Content != "Use gofmt." {
			t.Fatalf("the session's skills: %+v", skills)
		}
		var art struct {
			Ticket struct {
				Key                string
				AcceptanceCriteria string `json:"acceptance_criteria"`
			}
			Branch string
		}
		_ = json.Unmarshal(r.Artifacts, &art)
		if art.Ticket.Key != key || art.Ticket.AcceptanceCriteria != "it works" || art.Branch != "ballet/"+key {
			t.Fatalf("artifacts %s", r.Artifacts)
		}
		f := w.flow(key)
		if f.Status != "running" || f.Waiting != "run" || f.Run != r.ID {
			t.Fatalf("flow during the run: %+v", f)
		}
		w.runner.Complete(r, "done", "implemented")
		r = w.leaseStage(key, "review", 1)
		w.runner.Complete(r, "failed", "needs tests")
		r = w.leaseStage(key, "implement", 2) // failed → back to implement: iteration 2
		var art2 struct {
			PreviousReport struct{ Stage, Outcome, Report string } `json:"previous_report"`
		}
		_ = json.Unmarshal(r.Artifacts, &art2)
		if art2.PreviousReport.Stage != "review" || art2.PreviousReport.Outcome != "failed" || art2.PreviousReport.Report != "needs tests" {
			t.Fatalf("the previous stage's report was not handed over: %s", r.Artifacts)
		}
		w.repo.PushBranch("ballet/" + key) // the agent pushes its work
		w.runner.Complete(r, "done", "tests added")
		w.runner.Complete(w.leaseStage(key, "review", 2), "done", "looks good")
		w.runner.Complete(w.leaseStage(key, "verify", 2), "done", "verified")

		// Plain git: Ballet cannot merge; the stage waits for a human.
		f = w.await(key, "a human merge", func(f flowView) bool { return f.Stage == "integrate" && f.Waiting == "merge" })
		if f.Status != "waiting" {
			t.Fatalf("waiting for a human merge must not hold a slot: %+v", f)
		}
		w.repo.MergeBranch("ballet/"+key, true) // merged and the branch deleted
		f = w.await(key, "done", func(f flowView) bool { return f.Status == "done" })
		if f.Outcome != "done" || !strings.Contains(f.Report, "merged") {
			t.Fatalf("finished flow %+v", f)
		}
		if st := w.itemState(key); st != "done" {
			t.Fatalf("ticket %s after $done", st)
		}
		evs := strings.Join(w.flowEvents(key), " ")
		for _, want := range []string{"flow.started ticket.state_changed flow.stage_started run.created run.started run.reported run.finished flow.stage_finished", "flow.stage_started", "flow.stage_finished", "flow.waiting", "flow.done"} {
			if !strings.Contains(evs, want) {
				t.Fatalf("history lacks %s: %s", want, evs)
			}
		}
		// Operations: flows by status and spend are on /metrics.
		m := string(w.Must(200, "", "GET", "/metrics", nil).Body)
		for _, want := range []string{`ballet_flows{status="done",waiting=""} 1`, `ballet_run_cost_usd_total{project=`, `ballet_jobs_total{kind="flow.enter",result="done"}`} {
			if !strings.Contains(m, want) {
				t.Fatalf("/metrics lacks %s", want)
			}
		}
		// A ticket whose flow ended may start again (once ready).
		var it struct{ Version int64 }
		w.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &it)
		w.Admin(200, "PATCH", "/api/v1/items/"+key, map[string]any{"version": it.Version, "state": "backlog"})
		w.Admin(200, "PATCH", "/api/v1/items/"+key, map[string]any{"version": it.Version + 1, "state": "ready"})
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
	})
}

// TestIterationLimitQuestionAnswerResume: going back past max_iterations
// raises a blocking question; the ticket waits for an answer; answering it
// resumes the same stage in a new session with the answer handed over.
func TestIterationLimitQuestionAnswerResume(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		for i := 1; i <= 3; i++ {
			w.runner.Complete(w.leaseStage(key, "implement", i), "done", "done")
			w.runner.Complete(w.leaseStage(key, "review", i), "failed", fmt.Sprintf("still wrong %d", i))
		}
		f := w.await(key, "the question", func(f flowView) bool { return f.Waiting == "answer" })
		if f.Status != "waiting" || f.Stage != "review" || f.Iteration != 3 {
			t.Fatalf("after the limit: %+v", f)
		}
		if st := w.itemState(key); st != "waiting_for_answer" {
			t.Fatalf("ticket %s", st)
		}
		w.Admin(409, "POST", "/api/v1/items/"+key+"/flow/approve", nil) // it waits for an answer, not an approval
		w.answerOpen(key, "accept it as is")
		r := w.leaseStage(key, "review", 3) // the same stage, a new session
		var art struct {
			AnsweredQuestions []struct{ Question, Answer string } `json:"answered_questions"`
		}
		_ = json.Unmarshal(r.Artifacts, &art)
		if len(art.AnsweredQuestions) != 1 || art.AnsweredQuestions[0].Answer != "accept it as is" ||
			!strings.Contains(art.AnsweredQuestions[0].Question, "iteration 4 of at most 3") {
			t.Fatalf("answered questions not handed over: %s", r.Artifacts)
		}
		f = w.flow(key)
		if f.Status != "running" || w.itemState(key) != "in_progress" {
			t.Fatalf("not resumed: %+v", f)
		}
		if !strings.Contains(strings.Join(w.flowEvents(key), " "), "flow.resumed") {
			t.Fatal("no flow.resumed")
		}
	})
}

// TestHumanStagesFailedTargetAndBlockingQuestions uses a project pipeline
// for bugs: a human approval, then an agent stage whose failure fails the
// pipeline ($failed), and blocking questions raised by a run.
func TestHumanStagesFailedTargetAndBlockingQuestions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{
				map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}},
				map[string]any{"id": "fix", "kind": "agent", "instructions": "Fix it.", "next": map[string]any{"failed": "$failed"}},
			}}})

		// Reject → $failed: flow failed, ticket paused; the comment is the report.
		a := w.ticket("bug")
		w.Admin(200, "POST", "/api/v1/items/"+a+"/flow/start", nil)
		f := w.await(a, "approval", func(f flowView) bool { return f.Waiting == "approval" })
		if f.Pipeline != "bug" || f.PipelineVersion != 1 || f.Status != "waiting" {
			t.Fatalf("bug flow %+v", f)
		}
		w.Admin(400, "POST", "/api/v1/items/"+a+"/flow/reject", map[string]any{"comment": 5})
		w.Admin(200, "POST", "/api/v1/items/"+a+"/flow/reject", map[string]any{"comment": "not a bug"})
		f = w.await(a, "failed", func(f flowView) bool { return f.Status == "failed" })
		if f.Report != "not a bug" || w.itemState(a) != "paused" {
			t.Fatalf("rejected flow %+v, ticket %s", f, w.itemState(a))
		}
		w.Admin(409, "POST", "/api/v1/items/"+a+"/flow/reject", nil)

		// Approve → fix; the run asks a blocking question: the stage ends
		// without an outcome and the flow waits; the answer resumes it.
		b := w.ticket("bug")
		w.Admin(200, "POST", "/api/v1/items/"+b+"/flow/start", nil)
		w.await(b, "approval", func(f flowView) bool { return f.Waiting == "approval" })
		w.Admin(200, "POST", "/api/v1/items/"+b+"/flow/approve", map[string]any{"comment": "go"})
		r := w.leaseStage(b, "fix", 1)
		w.runner.Ask(r, "Which database?", true)
		w.runner.Complete(r, "done", "asked")
		f = w.await(b, "answer", func(f flowView) bool { return f.Waiting == "answer" })
		if f.Stage != "fix" || w.itemState(b) != "waiting_for_answer" {
			t.Fatalf("after a blocking question: %+v", f)
		}
		w.answerOpen(b, "SQLite")
		r = w.leaseStage(b, "fix", 1)
		// A run that finishes without a report has failed: $failed here.
		w.runner.Finish(r, 0)
		f = w.await(b, "failed", func(f flowView) bool { return f.Status == "failed" })
		if f.Outcome != "failed" || !strings.Contains(f.Report, "without a report") {
			t.Fatalf("no report: %+v", f)
		}
	})
}

// TestNeverPushedBranchAndStopping: a merge stage whose branch was never
// pushed ends failed with a report saying so; pausing a ticket stops its
// flow and cancels its run.
func TestNeverPushedBranchAndStopping(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/docs", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "integrate", "kind": "platform", "action": "merge"}}}})
		d := w.ticket("docs")
		w.Admin(200, "POST", "/api/v1/items/"+d+"/flow/start", nil)
		f := w.await(d, "the question", func(f flowView) bool { return f.Waiting == "answer" })
		if f.Outcome != "failed" || !strings.Contains(f.Report, "never pushed") {
			t.Fatalf("never pushed: %+v", f)
		}

		k := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+k+"/flow/start", nil)
		r := w.leaseStage(k, "implement", 1)
		var it struct{ Version int64 }
		w.Admin(200, "GET", "/api/v1/items/"+k, nil).JSON(t, &it)
		w.Admin(200, "PATCH", "/api/v1/items/"+k, map[string]any{"version": it.Version, "state": "paused"})
		f = w.await(k, "stopped", func(f flowView) bool { return f.Status == "stopped" })
		var hb struct{ Cancelled bool }
		w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/heartbeat", nil).JSON(t, &hb)
		if !hb.Cancelled {
			t.Fatal("the stopped flow's run was not cancelled")
		}
		w.runner.Finish(r, 143)
		var run struct{ Status string }
		w.Admin(200, "GET", "/api/v1/runs/"+r.ID, nil).JSON(t, &run)
		if run.Status != "cancelled" {
			t.Fatalf("run %s", run.Status)
		}
		if fl := w.flow(k); fl.Status != "stopped" {
			t.Fatalf("a late finish changed the stopped flow: %+v", fl)
		}
		_ = context.Background
	})
}

// TestFlowRunsOnThePinnedVersion: a ticket runs on the pipeline version it
// started with, even when a new version is published meanwhile.
func TestFlowRunsOnThePinnedVersion(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		w.runner.Complete(w.leaseStage(key, "implement", 1), "done", "ok")
		// Publish a one-stage default pipeline while the ticket runs.
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "only", "kind": "agent"}}}})
		w.runner.Complete(w.leaseStage(key, "review", 1), "done", "still the template")
		f := w.await(key, "verify", func(f flowView) bool { return f.Stage != "review" })
		if f.Pipeline != "default" || f.PipelineVersion != 0 || f.Stage != "verify" {
			t.Fatalf("the running flow changed pipeline: %+v", f)
		}
		// A ticket started now gets the new version.
		k2 := w.ticket("task")
		var started flowView
		w.Admin(200, "POST", "/api/v1/items/"+k2+"/flow/start", nil).JSON(t, &started)
		if started.PipelineVersion != 1 || started.Stage != "only" {
			t.Fatalf("new ticket: %+v", started)
		}
	})
}

// TestStartRefusesABlockedTicket: starting a ready ticket that an open item
// blocks, directly or through its epic, is a 409 naming each blocker and
// its state, and changes nothing; once none is open (removed, done or
// cancelled) it starts.
func TestStartRefusesABlockedTicket(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		create := func(body map[string]any) string {
			var it struct{ Key string }
			e.Admin(201, "POST", "/api/v1/projects/ACME/items", body).JSON(t, &it)
			return it.Key
		}
		epic := create(map[string]any{"type": "epic", "title": "E"})
		key := create(map[string]any{"type": "task", "title": "A", "epic": epic, "acceptance_criteria": "it works", "state": "ready"})
		own := create(map[string]any{"type": "task", "title": "B"})
		epics := create(map[string]any{"type": "task", "title": "C", "state": "ready"})
		e.Admin(201, "POST", "/api/v1/items/"+key+"/blockers/"+own, nil)
		e.Admin(201, "POST", "/api/v1/items/"+epic+"/blockers/"+epics, nil)
		var before struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &before)
		var refused struct {
			Error struct{ Code, Message string }
		}
		e.Admin(409, "POST", "/api/v1/items/"+key+"/flow/start", nil).JSON(t, &refused)
		want := key + " is blocked by " + own + " (backlog), " + epics + " (ready)"
		if refused.Error.Code != "conflict" || !strings.Contains(refused.Error.Message, want) {
			t.Fatalf("refusal %+v, want a conflict saying %q", refused.Error, want)
		}
		var after struct {
			State   string
			Version int64
		}
		e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &after)
		if after.State != "ready" || after.Version != before.Version {
			t.Fatalf("after the refusal the ticket is %+v", after)
		}
		e.Admin(404, "GET", "/api/v1/items/"+key+"/flow", nil)

		e.Admin(204, "DELETE", "/api/v1/items/"+key+"/blockers/"+own, nil)
		e.Admin(409, "POST", "/api/v1/items/"+key+"/flow/start", nil) // its epic's blocker is still open
		var bl struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/items/"+epics, nil).JSON(t, &bl)
		e.Admin(200, "PATCH", "/api/v1/items/"+epics, map[string]any{"version": bl.Version, "state": "cancelled"})
		e.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
	})
}

// TestNothingToApprove: a runner reports how many commits the ticket's
// branch has ahead of the default branch after a stage (bounded: 400
// beyond). With none, the stage's report says so and the human stage that
// follows shows nothing_to_approve (branch_ahead 0); with some, neither.
func TestNothingToApprove(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/task", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{
				map[string]any{"id": "implement", "kind": "agent"},
				map[string]any{"id": "approve", "kind": "human"},
			}}})
		pass := func(ahead int) map[string]any {
			key := w.ticket("task")
			w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
			r := w.leaseStage(key, "implement", 1)
			w.Must(200, r.Token, "POST", "/api/v1/runs/"+r.ID+"/report", map[string]any{"outcome": "done", "summary": "Wrote it."})
			for _, bad := range []int{-1, 1_000_001} {
				resp := w.Do(w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/finish", map[string]any{"exit_status": 0, "branch_ahead": bad})
				if resp.Status != 400 || !strings.Contains(string(resp.Body), "branch_ahead") {
					t.Fatalf("finish with branch_ahead %d: %d %s", bad, resp.Status, resp.Body)
				}
			}
			w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/finish", map[string]any{"exit_status": 0, "branch_ahead": ahead})
			w.await(key, "approval", func(f flowView) bool { return f.Waiting == "approval" })
			return w.Admin(200, "GET", "/api/v1/items/"+key+"/flow", nil).Map(t)
		}
		f := pass(0)
		if f["nothing_to_approve"] != true || f["branch_ahead"] != 0.0 ||
			!strings.HasPrefix(f["report"].(string), "Wrote it.\n\nBallet: after this stage the branch ballet/ACME-1 has no commit ahead of the default branch") {
			t.Fatalf("after a stage that left nothing: %v", f)
		}
		f = pass(2)
		if _, ok := f["nothing_to_approve"]; ok || f["branch_ahead"] != 2.0 || f["report"] != "Wrote it." {
			t.Fatalf("after a stage that left 2 commits: %v", f)
		}
	})
}
