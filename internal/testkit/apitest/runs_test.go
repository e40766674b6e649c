package apitest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// queueRun creates a flow on the item (the flow engine is not needed for
// the runner protocol: the row is written directly) and its queued run,
// as the flow engine does, then wakes waiting leases.
func queueRun(e *apitest.Env, itemKey string) run.Run { return queueRunWith(e, itemKey, nil) }

// queueRunWith is queueRun with the run adjusted before it is created.
func queueRunWith(e *apitest.Env, itemKey string, adjust func(*run.Run)) run.Run {
	e.T.Helper()
	var it struct{ ID, OrganizationID, ProjectID string }
	r := e.Admin(200, "GET", "/api/v1/items/"+itemKey, nil)
	var m map[string]any
	r.JSON(e.T, &m)
	it.ID, it.OrganizationID, it.ProjectID = m["id"].(string), m["organization_id"].(string), m["project_id"].(string)
	ctx := context.Background()
	now := e.Core.Clock.Now()
	flowID := transition.NewID()
	if _, err := e.Store.Exec(ctx, store.Stmt(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version,
definition, stage, iteration, max_iterations, step, status, waiting, run_id, outcome, report, started_at, updated_at, finished_at, version)
VALUES (?, ?, ?, ?, 'default', 0, '{}', 'implement', 1, 3, 1, 'running', 'run', NULL, NULL, NULL, ?, ?, NULL, 1)`,
		flowID, it.OrganizationID, it.ProjectID, it.ID, now.UnixMilli(), now.UnixMilli())); err != nil {
		e.T.Fatal(err)
	}
	rn := run.Run{ID: transition.NewID(), OrganizationID: it.OrganizationID, ProjectID: it.ProjectID, ItemID: it.ID, FlowID: flowID,
		Stage: "implement", Iteration: 1, Step: 1, Adapter: "claude-code", Model: "sonnet", Instructions: "Implement the ticket.",
		Skills: []string{}, Artifacts: json.RawMessage(`{"ticket":{"key":"` + itemKey + `"}}`)}
	if adjust != nil {
		adjust(&rn)
	}
	if err := e.Core.Applier.Apply(ctx, new(run.Create(rn, event.System, now))); err != nil {
		e.T.Fatal(err)
	}
	e.Core.Runs.Notify()
	return rn
}

// runnerToken creates a runner token as the platform admin.
func runnerToken(e *apitest.Env, name string) string {
	e.T.Helper()
	var tk struct{ Token string }
	e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": name, "kind": "runner"}).JSON(e.T, &tk)
	return tk.Token
}

// registerRunner registers a runner with a runner token and returns its id.
func registerRunner(e *apitest.Env, token, name string) string {
	e.T.Helper()
	var rn struct{ ID string }
	e.Must(201, token, "POST", "/api/v1/runners", map[string]any{"name": name}).JSON(e.T, &rn)
	return rn.ID
}

type apiRun struct {
	ID               string          `json:"id"`
	Item             string          `json:"item"`
	ItemID           string          `json:"item_id"`
	Status           string          `json:"status"`
	RunnerID         string          `json:"runner_id"`
	Outcome          string          `json:"outcome"`
	Report           string          `json:"report"`
	BlockingQuestion bool            `json:"blocking_question"`
	ExitStatus       *int            `json:"exit_status"`
	Error            string          `json:"error"`
	Usage            runproto.Usage  `json:"usage"`
	CancelRequested  bool            `json:"cancel_requested"`
	Artifacts        json.RawMessage `json:"artifacts"`
	StartedAt        *time.Time      `json:"started_at"`
	FinishedAt       *time.Time      `json:"finished_at"`
	Version          int64           `json:"version"`
}

type apiLease struct {
	Run      apiRun `json:"run"`
	RunToken string `json:"run_token"`
}

// lease leases a run (200) for the runner.
func lease(e *apitest.Env, token, runnerID string) apiLease {
	e.T.Helper()
	var l apiLease
	e.Must(200, token, "POST", "/api/v1/runners/"+runnerID+"/lease", map[string]any{}).JSON(e.T, &l)
	return l
}

// runEvents returns the types of a run's events.
func runEvents(e *apitest.Env, runID string) []string {
	e.T.Helper()
	evs, err := event.List(context.Background(), e.Store, event.Filter{EntityType: "run", EntityID: runID})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func TestRunnerProtocolAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		orgID := e.Org("acme")
		e.Project("acme", "ACME")
		viewer := e.RoleToken(orgID, "viewer")
		member := e.RoleToken(orgID, "member")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser"})
		rt := runnerToken(e, "runner-1")

		// Register: runner tokens only; bad input names the field.
		body := map[string]any{"name": "host-1", "labels": map[string]string{"os": "linux", "arch": "amd64"}}
		r := e.Must(201, rt, "POST", "/api/v1/runners", body)
		m := r.Map(t)
		if got := sortedKeys(m); got != "adapters,alive,capacity,created_at,drained,draining,id,labels,last_seen_at,name,problem,sessions,token_id,version" {
			t.Fatalf("runner fields: %s", got)
		}
		runnerID := m["id"].(string)
		e.Must(403, member, "POST", "/api/v1/runners", body)
		e.Must(403, apitest.BootstrapToken, "POST", "/api/v1/runners", body)
		e.Must(401, "", "POST", "/api/v1/runners", body)
		for b, want := range map[string]string{
			`{"name":""}`:                           "name",
			`{"name":"x","labels":{"Bad":"v"}}`:     "labels.Bad",
			`{"name":"x","labels":["a"]}`:           "labels",
			`{"name":"x","owner":"me"}`:             "owner",
			`{"name":"x","labels":{"os":"linux"},}`: "",
		} {
			r := e.Must(400, rt, "POST", "/api/v1/runners", b)
			if got := fields(t, r); got != want {
				t.Errorf("%s: fields %q, want %q", b, got, want)
			}
		}

		// An empty queue: 204 without a body, with or without a request body.
		for _, b := range []any{nil, map[string]any{}, map[string]any{"wait_seconds": 0}} {
			if r := e.Must(204, rt, "POST", "/api/v1/runners/"+runnerID+"/lease", b); len(r.Body) != 0 {
				t.Fatalf("204 with a body: %q", r.Body)
			}
		}
		for _, b := range []string{`{"wait_seconds":61}`, `{"wait_seconds":-1}`, `{"wait_seconds":1.5}`} {
			if r := e.Must(400, rt, "POST", "/api/v1/runners/"+runnerID+"/lease", b); fields(t, r) != "wait_seconds" {
				t.Errorf("%s: %s", b, r.Body)
			}
		}

		// Lease: the run and its run token.
		queued := queueRun(e, "ACME-1")
		l := lease(e, rt, runnerID)
		if l.Run.ID != queued.ID || l.Run.Status != "running" || l.Run.RunnerID != runnerID || l.Run.Item != "ACME-1" ||
			l.Run.StartedAt == nil || l.RunToken == "" || string(l.Run.Artifacts) != `{"ticket":{"key":"ACME-1"}}` {
			t.Fatalf("leased %+v", l)
		}
		tok := l.RunToken
		if strings.Contains(e.Logs(), tok) {
			t.Fatal("the run token was logged")
		}
		path := "/api/v1/runs/" + l.Run.ID

		// Heartbeats: the runner's.
		var hb map[string]any
		e.Must(200, rt, "POST", path+"/heartbeat", nil).JSON(t, &hb)
		if len(hb) != 1 || hb["cancelled"] != false {
			t.Fatalf("heartbeat %v", hb)
		}
		e.Must(200, rt, "POST", "/api/v1/runners/"+runnerID+"/heartbeat", nil)

		// Report: bad input, then once; a repeat is fine, another is not.
		for b, want := range map[string]string{
			`{"outcome":"maybe","summary":"x"}`:      "outcome",
			`{"outcome":"done","summary":""}`:        "summary",
			`{"outcome":"done","summary":"x","x":1}`: "x",
		} {
			if r := e.Must(400, tok, "POST", path+"/report", b); fields(t, r) != want {
				t.Errorf("report %s: %s", b, r.Body)
			}
		}
		report := map[string]any{"outcome": "done", "summary": "Implemented the parser."}
		var got apiRun
		e.Must(200, tok, "POST", path+"/report", report).JSON(t, &got)
		if got.Outcome != "done" || got.Report != "Implemented the parser." {
			t.Fatalf("reported %+v", got)
		}
		e.Must(200, tok, "POST", path+"/report", report)
		e.Must(409, tok, "POST", path+"/report", map[string]any{"outcome": "failed", "summary": "Changed my mind."})

		// Questions land on the ticket, asked by the run.
		var q map[string]any
		e.Must(201, tok, "POST", path+"/questions", map[string]any{"text": "Which grammar?", "blocking": true}).JSON(t, &q)
		if q["item"] != "ACME-1" || q["blocking"] != true || q["asked_by"].(map[string]any)["subject"] != "run:"+l.Run.ID {
			t.Fatalf("question %v", q)
		}
		e.Must(400, tok, "POST", path+"/questions", map[string]any{"text": strings.Repeat("?", 16<<10+1)})
		e.Must(200, viewer, "GET", path, nil).JSON(t, &got)
		if !got.BlockingQuestion {
			t.Fatalf("run after a blocking question %+v", got)
		}

		// Finish: bad input names the field; then the run succeeds.
		for b, want := range map[string]string{
			`{}`: "exit_status",
			`{"exit_status":0,"usage":{"input_tokens":-1}}`: "usage.input_tokens",
			`{"exit_status":0,"usage":{"cost_usd":-1}}`:     "usage.cost_usd",
			`{"exit_status":"0"}`:                           "exit_status",
		} {
			if r := e.Must(400, rt, "POST", path+"/finish", b); fields(t, r) != want {
				t.Errorf("finish %s: %s", b, r.Body)
			}
		}
		e.Must(200, rt, "POST", path+"/finish", map[string]any{"exit_status": 0,
			"usage": map[string]any{"input_tokens": 5000, "output_tokens": 800, "cost_usd": 0.12}}).JSON(t, &got)
		if got.Status != "succeeded" || got.ExitStatus == nil || *got.ExitStatus != 0 || got.FinishedAt == nil ||
			got.Usage != (runproto.Usage{InputTokens: 5000, OutputTokens: 800, CostUSD: 0.12}) {
			t.Fatalf("finished %+v", got)
		}
		// The run token is revoked with the finish; the runner's finish
		// again changes nothing, and its heartbeat is refused.
		e.Must(401, tok, "POST", path+"/report", report)
		e.Must(409, rt, "POST", path+"/heartbeat", nil)
		var again run.Run
		e.Must(200, rt, "POST", path+"/finish", map[string]any{"exit_status": 1}).JSON(t, &again)
		if again.Status != "succeeded" || again.Version != got.Version {
			t.Fatalf("finished again %+v, first %+v", again, got)
		}
		if got := strings.Join(runEvents(e, l.Run.ID), ","); got != "run.created,run.started,run.reported,run.question_asked,run.finished" {
			t.Fatalf("run events: %s", got)
		}
		rows, err := s.Query(context.Background(), `SELECT dedupe_key FROM jobs WHERE kind = ?`, flow.JobRunFinished)
		if err != nil || rows.Len() != 1 {
			t.Fatalf("flow.run_finished jobs: %v %d", err, rows.Len())
		}
		var key string
		_ = rows.Scan(0, &key)
		if key != fmt.Sprintf("flow:%s:run_finished:1", queued.FlowID) {
			t.Fatalf("dedupe key %s", key)
		}

		// Reading runs: tracker.read.
		var list struct{ Runs []apiRun }
		e.Must(200, viewer, "GET", "/api/v1/items/ACME-1/runs", nil).JSON(t, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != l.Run.ID || list.Runs[0].Status != "succeeded" {
			t.Fatalf("runs of ACME-1 %+v", list)
		}
		e.Must(404, viewer, "GET", "/api/v1/runs/nope", nil)
		e.Must(404, viewer, "GET", "/api/v1/items/ACME-9/runs", nil)

		// A session that ends without a report has failed.
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Lexer"})
		queueRun(e, "ACME-2")
		l = lease(e, rt, runnerID)
		e.Must(200, rt, "POST", "/api/v1/runs/"+l.Run.ID+"/finish", map[string]any{"exit_status": 0}).JSON(t, &got)
		if got.Status != "failed" || got.Error != "the session ended without a report" {
			t.Fatalf("finished without a report %+v", got)
		}
	})
}

func TestRunTokenScopeAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "A"})
		createItem(e, "ACME", map[string]any{"type": "task", "title": "B"})
		rt := runnerToken(e, "runner-1")
		runnerID := registerRunner(e, rt, "host-1")
		queueRun(e, "ACME-1")
		queueRun(e, "ACME-2")
		a, b := lease(e, rt, runnerID), lease(e, rt, runnerID)
		pathB := "/api/v1/runs/" + b.Run.ID
		// A's token cannot touch B: B does not exist for it.
		e.Must(404, a.RunToken, "POST", pathB+"/report", map[string]any{"outcome": "done", "summary": "x"})
		e.Must(404, a.RunToken, "POST", pathB+"/questions", map[string]any{"text": "x"})
		e.Must(404, a.RunToken, "GET", pathB+"/skills", nil)
		// Neither runner nor run tokens read the tracker (they hold no role).
		for _, tok := range []string{rt, a.RunToken} {
			e.Must(404, tok, "GET", "/api/v1/items/ACME-1", nil)
			e.Must(404, tok, "GET", "/api/v1/projects/ACME/items", nil)
			e.Must(404, tok, "GET", "/api/v1/runs/"+a.Run.ID, nil)
			e.Must(404, tok, "GET", "/api/v1/items/ACME-1/runs", nil)
		}
		// Runner routes take runner tokens; the session's routes run
		// tokens.
		e.Must(403, rt, "POST", pathB+"/report", map[string]any{"outcome": "done", "summary": "x"})
		e.Must(403, rt, "POST", pathB+"/questions", map[string]any{"text": "x"})
		e.Must(403, a.RunToken, "POST", "/api/v1/runners", map[string]any{"name": "x"})
		e.Must(403, a.RunToken, "POST", "/api/v1/runners/"+runnerID+"/lease", nil)
		// Another runner token does not find this runner.
		rt2 := runnerToken(e, "runner-2")
		e.Must(404, rt2, "POST", "/api/v1/runners/"+runnerID+"/lease", nil)
		e.Must(404, rt2, "POST", "/api/v1/runners/"+runnerID+"/heartbeat", nil)
		// …nor its runs.
		e.Must(404, rt2, "POST", pathB+"/heartbeat", nil)
		e.Must(404, rt2, "POST", pathB+"/finish", map[string]any{"exit_status": 0})
		e.Must(404, rt2, "POST", pathB+"/usage", map[string]any{"input_tokens": 1})
		e.Must(404, rt2, "POST", pathB+"/log?offset=0", "x")
		// Nothing above changed B.
		if got := strings.Join(runEvents(e, b.Run.ID), ","); got != "run.created,run.started" {
			t.Fatalf("B's events: %s", got)
		}
	})
}

func TestLeaseAPIWaitsAndRaces(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		rt := runnerToken(e, "runner-1")
		runnerID := registerRunner(e, rt, "host-1")
		rt2 := runnerToken(e, "runner-2")
		runner2 := registerRunner(e, rt2, "host-2")

		// Nothing comes: 204, not before the wait is over (how soon
		// after it is no concern of a test).
		start := time.Now()
		e.Must(204, rt, "POST", "/api/v1/runners/"+runnerID+"/lease", map[string]any{"wait_seconds": 1})
		if d := time.Since(start); d < time.Second {
			t.Fatalf("an empty 1 s long poll answered after %s", d)
		}

		// A run created while the poll waits is leased by that poll (that
		// Notify wakes it at once, on the fake clock: run.TestLeaseLongPoll).
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Late"})
		got := make(chan *apitest.Response, 1)
		go func() {
			got <- e.Do(rt, "POST", "/api/v1/runners/"+runnerID+"/lease", map[string]any{"wait_seconds": 30})
		}()
		apitest.Await(t, "the long poll to wait", func() bool { return e.Core.Runs.Waiting() == 1 })
		queued := queueRun(e, "ACME-1")
		r := apitest.Receive(t, got, "the long poll's answer")
		var l apiLease
		if r.Status != 200 {
			t.Fatalf("long poll: %d %s", r.Status, r.Body)
		}
		r.JSON(t, &l)
		if l.Run.ID != queued.ID {
			t.Fatalf("long poll leased %s, want %s", l.Run.ID, queued.ID)
		}

		// Two runners racing for one run: one gets it, the other 204.
		for i := 2; i <= 4; i++ {
			createItem(e, "ACME", map[string]any{"type": "task", "title": fmt.Sprintf("Race %d", i)})
			queueRun(e, fmt.Sprintf("ACME-%d", i))
			var wg sync.WaitGroup
			statuses := make([]int, 2)
			for j, c := range [][2]string{{rt, runnerID}, {rt2, runner2}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses[j] = e.Do(c[0], "POST", "/api/v1/runners/"+c[1]+"/lease", nil).Status
				}()
			}
			wg.Wait()
			if !(statuses[0] == 200 && statuses[1] == 204 || statuses[0] == 204 && statuses[1] == 200) {
				t.Fatalf("race %d: statuses %v", i, statuses)
			}
		}
	})
}
