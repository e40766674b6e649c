package apitest_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// leaseV2 is the answer of a version 2 lease.
type leaseV2 struct {
	Run      struct{ ID, Status string }
	RunToken string `json:"run_token"`
	Session  runproto.Session
}

// wantField checks that a 400 names the field.
func wantField(t *testing.T, r *apitest.Response, field string) {
	t.Helper()
	if !strings.Contains(string(r.Body), `"field":"`+field+`"`) {
		t.Fatalf("want a problem with %s: %s", field, r.Body)
	}
}

// TestRunnerProtocolV2 drives version 2 of the runner protocol over HTTP:
// the registration's new fields (bad ones a 400 naming the field), the
// heartbeat's sessions and cancel, a lease's session (the stage's skills
// with their contents, the repository with the branch, the credential
// resolved from Core's environment, Core's MCP endpoint, the log limit),
// and a finish that may be repeated while the run token serves nothing
// else. The credential is in no event and no log line.
func TestRunnerProtocolV2(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.HTTP.PublicURL = "https://ballet.example.com/" })
		e.Org("acme")
		e.Project("acme", "ACME")
		env := "ACME_TEST_CRED_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		secret := "s3cr3t-" + uuid.NewString()
		os.Setenv(env, "bot:"+secret)
		t.Cleanup(func() { os.Unsetenv(env) })
		var proj struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &proj)
		e.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": proj.Version, "repository": map[string]any{
			"url": "https://git.example.com/acme/app.git", "default_branch": "main", "credentials_ref": "env:" + env}})
		for _, sk := range []string{"go", "sql"} {
			e.Admin(201, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": sk, "description": "About " + sk,
				"content": "# " + sk + "\nUse it well."})
		}
		tok := runnerToken(e, "v2")
		for _, c := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"name": "h", "capacity": 0}, "capacity"},
			{map[string]any{"name": "h", "capacity": 65}, "capacity"},
			{map[string]any{"name": "h", "adapters": []any{map[string]any{"name": "codex", "version": "1"}}}, "adapters[0].name"},
			{map[string]any{"name": "h", "version": strings.Repeat("v", 101)}, "version"},
			{map[string]any{"name": "h", "problem": strings.Repeat("p", 1001)}, "problem"},
		} {
			wantField(t, e.Must(400, tok, "POST", "/api/v1/runners", c.body), c.field)
		}
		reg := map[string]any{"name": "host-1", "capacity": 2, "version": "ballet 0.9.0",
			"adapters": []any{map[string]any{"name": "claude-code", "version": "2.1.332"}}}
		var rn run.Runner
		e.Must(201, tok, "POST", "/api/v1/runners", reg).JSON(t, &rn)
		if rn.Capacity != 2 || rn.Version != "ballet 0.9.0" || !rn.Alive || len(rn.Sessions) != 0 || len(rn.Adapters) != 1 {
			t.Fatalf("registered %+v", rn)
		}
		var again run.Runner
		e.Must(201, tok, "POST", "/api/v1/runners", reg).JSON(t, &again)
		if again.ID != rn.ID {
			t.Fatalf("registering host-1 again made runner %s, want %s", again.ID, rn.ID)
		}

		item := createTask(e, "ACME")
		queued := queueRunWith(e, item, func(r *run.Run) { r.Skills = []string{"go"} })
		wantField(t, e.Must(400, tok, "POST", "/api/v1/runners/"+rn.ID+"/lease", map[string]any{"adapters": []string{"opencode"}}), "adapters[0]")
		var l leaseV2
		e.Must(200, tok, "POST", "/api/v1/runners/"+rn.ID+"/lease", map[string]any{"wait_seconds": 0, "adapters": []string{"claude-code"}}).JSON(t, &l)
		ss := l.Session
		if l.Run.ID != queued.ID || ss.Ticket.Key != item || ss.Stage.ID != "implement" || ss.Stage.Adapter != "claude-code" ||
			ss.Stage.TimeoutSeconds != 7200 || ss.Stage.MaxIterations != 3 || ss.Stage.Iteration != 1 {
			t.Fatalf("lease %+v", l)
		}
		if len(ss.Skills) != 1 || ss.Skills[0] != (runproto.SessionSkill{Name: "go", Description: "About go", Content: "# go\nUse it well."}) {
			t.Fatalf("skills %+v, want go only", ss.Skills)
		}
		if ss.Repository == nil || *ss.Repository != (runproto.SessionRepo{Forge: "git", URL: "https://git.example.com/acme/app.git",
			DefaultBranch: "main", Branch: "ballet/" + item}) {
			t.Fatalf("repository %+v", ss.Repository)
		}
		if ss.Credential == nil || *ss.Credential != (runproto.Credential{Username: "bot", Secret: secret}) {
			t.Fatalf("credential %v", ss.Credential)
		}
		if ss.MCP.URL != "https://ballet.example.com/api/v1/mcp" || ss.Log.Limit != 8<<20 || ss.PreviousReport != nil || ss.AnsweredQuestions == nil {
			t.Fatalf("session %+v", ss)
		}

		// The heartbeat names the sessions to stop.
		var hb run.RunnerBeat
		e.Must(200, tok, "POST", "/api/v1/runners/"+rn.ID+"/heartbeat", map[string]any{"sessions": []string{l.Run.ID, "gone"}}).JSON(t, &hb)
		if !slices.Equal(hb.Cancel, []string{"gone"}) || !slices.Equal(hb.Sessions, []string{l.Run.ID}) || !hb.Alive {
			t.Fatalf("heartbeat %+v", hb)
		}
		e.Must(200, tok, "POST", "/api/v1/runners/"+rn.ID+"/heartbeat", nil) // the body is optional
		wantField(t, e.Must(400, tok, "POST", "/api/v1/runners/"+rn.ID+"/heartbeat", map[string]any{"sessions": []string{""}}), "sessions[0]")

		// Finish (the runner's), then finish again: the same answer; the
		// run token, revoked with the finish, serves nothing any more.
		path := "/api/v1/runs/" + l.Run.ID
		wantField(t, e.Must(400, tok, "POST", path+"/finish", map[string]any{"exit_status": 0,
			"usage": map[string]any{"cache_read_tokens": -1}}), "usage.cache_read_tokens")
		fin := map[string]any{"exit_status": 0, "usage": map[string]any{"input_tokens": 10, "output_tokens": 2,
			"cache_read_tokens": 300, "cache_write_tokens": 40, "cost_usd": 0.5}}
		first := e.Must(200, tok, "POST", path+"/finish", fin)
		second := e.Must(200, tok, "POST", path+"/finish", map[string]any{"exit_status": 3})
		if string(first.Body) != string(second.Body) {
			t.Fatalf("a repeated finish answered\n%s\nthe first\n%s", second.Body, first.Body)
		}
		var done run.Run
		first.JSON(t, &done)
		if done.Status != run.StatusFailed || done.Usage != (runproto.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 300,
			CacheWriteTokens: 40, CostUSD: 0.5}) {
			t.Fatalf("finished %+v", done)
		}
		e.Must(409, tok, "POST", path+"/heartbeat", nil)
		e.Must(401, l.RunToken, "POST", path+"/report", map[string]any{"outcome": "done", "summary": "late"})
		e.Must(401, l.RunToken, "POST", path+"/questions", map[string]any{"text": "late?", "blocking": false})
		e.Must(401, l.RunToken, "GET", path+"/skills", nil)

		// A missing variable fails the next run with a clear error, naming
		// the variable and never a value.
		os.Unsetenv(env)
		missing := queueRun(e, createTask(e, "ACME"))
		e.Must(204, tok, "POST", "/api/v1/runners/"+rn.ID+"/lease", map[string]any{"wait_seconds": 0})
		var got run.Run
		e.Admin(200, "GET", "/api/v1/runs/"+missing.ID, nil).JSON(t, &got)
		if got.Status != run.StatusFailed || !strings.Contains(got.Error, env+" is not set in Core's environment") {
			t.Fatalf("a run without its credential: %+v", got)
		}
		evs, err := event.List(t.Context(), s, event.Filter{Limit: event.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if strings.Contains(string(ev.Payload), secret) {
				t.Fatalf("event %s holds the secret: %s", ev.Type, ev.Payload)
			}
		}
		if strings.Contains(e.Logs(), secret) {
			t.Fatalf("the log holds the secret:\n%s", e.Logs())
		}
	})
}

// TestListRunners: a platform admin sees every runner with everything; an
// organization admin sees them without token and labels, with only the
// sessions of its own organization's tickets; anyone else is refused.
func TestListRunners(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		acme, beta := e.Org("acme"), e.Org("beta")
		e.Project("acme", "ACME")
		e.Project("beta", "BETA")
		tok := runnerToken(e, "lister")
		id := registerRunner(e, tok, "host-1")
		var runs []string
		for _, p := range []string{"ACME", "BETA"} {
			r := queueRun(e, createTask(e, p))
			var l leaseV2
			e.Must(200, tok, "POST", "/api/v1/runners/"+id+"/lease", map[string]any{}).JSON(t, &l)
			runs = append(runs, r.ID)
		}
		list := func(token string) []run.Runner {
			t.Helper()
			var l struct{ Runners []run.Runner }
			e.Must(200, token, "GET", "/api/v1/runners", nil).JSON(t, &l)
			return l.Runners
		}
		all := list(apitest.BootstrapToken)
		if len(all) != 1 || !slices.Equal(all[0].Sessions, runs) || all[0].TokenID == "" || !all[0].Alive || all[0].Capacity != 1 {
			t.Fatalf("platform admin's list %+v", all)
		}
		mine := list(e.RoleToken(acme, "admin"))
		if len(mine) != 1 || !slices.Equal(mine[0].Sessions, runs[:1]) || mine[0].TokenID != "" || !mine[0].Alive {
			t.Fatalf("acme admin's list %+v", mine)
		}
		if theirs := list(e.RoleToken(beta, "admin")); !slices.Equal(theirs[0].Sessions, runs[1:]) {
			t.Fatalf("beta admin's list %+v", theirs)
		}
		e.Must(403, e.RoleToken(acme, "member"), "GET", "/api/v1/runners", nil)
		e.Must(403, tok, "GET", "/api/v1/runners", nil)

		// /metrics: runs by status, runners by liveness.
		r := e.Must(200, "", "GET", "/metrics", nil)
		for _, want := range []string{`ballet_runs{status="running"} 2`, `ballet_runs{status="queued"} 0`, `ballet_runners{alive="true"} 1`,
			`ballet_runners{alive="false"} 0`} {
			if !strings.Contains(string(r.Body), want) {
				t.Fatalf("/metrics lacks %s", want)
			}
		}
	})
}

// createTask creates a ready task in project and returns its key.
func createTask(e *apitest.Env, project string) string {
	e.T.Helper()
	var it struct{ Key string }
	e.Admin(201, "POST", "/api/v1/projects/"+project+"/items", map[string]any{"type": "task", "title": fmt.Sprintf("task in %s", project)}).JSON(e.T, &it)
	return it.Key
}

// TestLeaseNamesTheTestCoresMCP: a test Core's [http] public_url is the
// address it answers on, so the sessions its leases describe reach its MCP
// endpoint (an agent CLI driven against a test Core needs it).
func TestLeaseNamesTheTestCoresMCP(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, storetest.Open(t, "sqlite"))
	e.Org("acme")
	e.Project("acme", "ACME")
	createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser"})
	r := e.NewRunner("r1")
	queueRun(e, "ACME-1")
	var l struct {
		Session struct{ MCP struct{ URL string } }
	}
	e.Must(200, r.Token, "POST", "/api/v1/runners/"+r.ID+"/lease", map[string]any{"wait_seconds": 0}).JSON(t, &l)
	if want := e.URL + "/api/v1/mcp"; l.Session.MCP.URL != want {
		t.Fatalf("the lease names the MCP endpoint %q; the test Core answers at %q", l.Session.MCP.URL, want)
	}
}
