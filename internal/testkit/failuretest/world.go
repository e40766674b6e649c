package failuretest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// The world the suite builds: a Core (the real binary) on the engine's
// database, a bare repository standing in for the plain-git forge (and a
// repository on Gitea), the organization, its projects and pipelines, the
// epics and tickets with their blockers, and the runners' tokens.

// ticket is a ticket or epic as the harness created it.
type ticket struct {
	Key       string
	Number    int64
	Type      string
	Epic      string   // the epic's key
	BlockedBy []string // keys
}

func newSuite(t *testing.T, o Options) *suite {
	s := &suite{t: t, o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x5eed)), flows: map[string]flowView{}, states: map[string]string{},
		approvedAt: map[string]int64{}, merged: map[string]int{}, mergedIter: map[string]int{}, askedHuman: map[string]bool{}, hit: map[string]bool{},
		byKey: map[string]*ticket{}, agentKillsOf: map[string]int{}, answered: map[string]int{}, answeredAt: map[string]int64{},
		forgeFired: map[string]int{}, prs: map[string]giteaPR{}, ciSet: map[string]string{}, ciFailedIter: map[string]int{}, approved: map[string]bool{}}
	s.sum.Engine = o.Engine
	return s
}

// build makes the logs' folder (kept when the run fails), the database
// (a SQLite file, or a three-node rqlite cluster), the bare repository,
// the repository on Gitea, and starts Core, whose OpenAPI document it
// loads; what it started is stopped when the test ends.
func (s *suite) build() {
	t, o := s.t, s.o
	var err error
	s.dir = o.LogDir
	if s.dir == "" {
		// Kept when the run fails: the logs and events.txt are the evidence.
		if s.dir, err = os.MkdirTemp("", "ballet-failuretest-"+o.Engine+"-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("failure suite (%s): logs and the event log (events.txt) kept in %s", o.Engine, s.dir)
				return
			}
			_ = os.RemoveAll(s.dir)
		})
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if s.harness, err = os.Create(filepath.Join(s.dir, "harness.log")); err != nil {
		t.Fatal(err)
	}
	s.logf("engine %s, seed %d, %d tickets, kill phase %s, logs in %s", o.Engine, o.Seed, o.Tickets, o.KillPhase, s.dir)
	t.Logf("failure suite (%s): seed %d (BALLET_FAILURETEST_SEED to repeat), logs in %s", o.Engine, o.Seed, s.dir)
	s.began = time.Now()
	storage := "[storage]\npath = \"data/core.db\""
	s.dbAddr = filepath.Join(s.dir, "data", "core.db")
	if o.Engine == "rqlite" {
		s.cluster = rqlitetest.Start(t, 3)
		s.dbAddr = strings.Join(s.cluster.URLs(), ",")
		storage = fmt.Sprintf("[storage]\nengine = \"rqlite\"\nurl = %q\npath = \"data/core.db\"", s.dbAddr)
	}
	s.repo = apitest.NewGitRepo(t)
	var coreEnv []string
	if o.Gitea != nil {
		if s.gitea, err = newGiteaSide(t, o.Gitea); err != nil {
			t.Fatal(err)
		}
		coreEnv = append(coreEnv, giteaCredEnv+"="+s.gitea.repo.Owner.Token, giteaHookEnv+"="+giteaHookSecret)
	}
	if s.core, err = newCoreProc(o.Binary, s.dir, storage, coreEnv); err != nil {
		t.Fatal(err)
	}
	if s.gitea != nil {
		// As a team would: Gitea tells Core at once of a review, a CI
		// status or a push, so that a merge check held back by the
		// harness's reviewer is not left to its slowing poll.
		s.gitea.repo.CreateWebhook(t, "http://"+s.core.addr+"/api/v1/hooks/gitea/"+OnGitea, giteaHookSecret,
			[]string{"pull_request", "pull_request_sync", "pull_request_review_approved", "status"})
		s.gitea.listen(t)
	}
	s.api = newClient(s.core.addr)
	t.Cleanup(func() {
		if err := s.core.kill(); err != nil {
			t.Error(err)
		}
		if s.runner != nil {
			if err := s.runner.kill(); err != nil {
				t.Error(err)
			}
		}
		if s.agents != nil {
			if err := s.agents.kill(); err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.Logf("harness log (tail):\n%s", tailFile(s.harness.Name(), 6000))
			t.Logf("core log (tail):\n%s", tailFile(s.core.logPath, 6000))
			if s.runner != nil {
				t.Logf("runner log (tail):\n%s", tailFile(s.runner.logPath, 3000))
			}
			if s.agents != nil {
				t.Logf("agent runner log (tail):\n%s", tailFile(s.agents.logPath, 6000))
			}
		}
	})
	if err := s.core.start(""); err != nil || s.core.dead() {
		t.Fatalf("start core: %v\n%s", err, tailFile(s.core.logPath, 4000))
	}
	var doc json.RawMessage
	s.must(200, "", "GET", "/api/v1/openapi.json", nil, &doc)
	if s.doc, err = openapitest.Load(doc); err != nil {
		t.Fatalf("the OpenAPI document Core serves: %v", err)
	}
}

// must calls the API (retrying while Core restarts) and wants a status.
func (s *suite) must(want int, token, method, path string, body, out any) {
	s.t.Helper()
	status, b, err := s.api.call(nil, 60*time.Second, token, method, path, body)
	if err != nil || status != want {
		s.t.Fatalf("%s %s: %d %s %v (want %d)", method, path, status, b, err, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// setup creates the organization, the two projects on the plain-git
// repository (Ballet merges ACME's tickets, humans merge HUM's), their
// pipelines (every agent stage on the test runner's adapter, opencode),
// the epics (in ACME) and tickets with their blockers (in backlog, then all
// moved to ready) and a runner token; with agent tickets also project AGT,
// its pipelines and tickets, and the real runner's token.
func (s *suite) setup() (runnerToken, agentToken string) {
	s.must(201, AdminToken, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"}, nil)
	for _, p := range projects {
		mode := map[string]string{BalletMerges: "auto", HumansMerge: "manual"}[p]
		s.must(201, AdminToken, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": p, "name": "Project " + p,
			"repository": map[string]any{"forge": "git", "url": s.repo.Bare}, "concurrency_limit": s.o.Limit,
			"merge_policy": map[string]any{"mode": mode}}, nil)
		s.must(200, AdminToken, "PUT", "/api/v1/projects/"+p+"/pipelines/default", map[string]any{"version": 0, "definition": onOpenCode(pipeline.Template())}, nil)
		s.must(200, AdminToken, "PUT", "/api/v1/projects/"+p+"/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"max_iterations": 3,
			"stages": []any{
				map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}},
				map[string]any{"id": "fix", "kind": "agent", "adapter": "opencode", "instructions": "Fix the bug.", "next": map[string]any{"done": "check", "failed": "$question"}},
				map[string]any{"id": "check", "kind": "agent", "adapter": "opencode", "instructions": "Check the fix.", "next": map[string]any{"done": "integrate", "failed": "fix"}},
				map[string]any{"id": "integrate", "kind": "platform", "action": "merge", "next": map[string]any{"failed": "fix"}},
			}}}, nil)
	}
	if s.o.Claude != "" {
		s.must(201, AdminToken, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": Agents, "name": "Project " + Agents,
			"repository": map[string]any{"forge": "git", "url": s.repo.Bare}, "concurrency_limit": s.o.Limit,
			"merge_policy": map[string]any{"mode": "auto"}}, nil)
		for name, def := range agentPipelines() {
			s.must(200, AdminToken, "PUT", "/api/v1/projects/"+Agents+"/pipelines/"+name, map[string]any{"version": 0, "definition": def}, nil)
		}
	}
	if s.gitea != nil {
		s.must(201, AdminToken, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": OnGitea, "name": "Project " + OnGitea,
			"repository": map[string]any{"forge": "gitea", "url": s.gitea.repo.CloneURL, "credentials_ref": "env:" + giteaCredEnv,
				"webhook_secret_ref": "env:" + giteaHookEnv},
			"concurrency_limit": s.o.Limit, "merge_policy": map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{ciContext}}}, nil)
		s.must(200, AdminToken, "PUT", "/api/v1/projects/"+OnGitea+"/pipelines/default", map[string]any{"version": 0, "definition": onOpenCode(pipeline.Template())}, nil)
	}
	create := func(project, typ, title, epic, description string) *ticket {
		var it itemView
		body := map[string]any{"type": typ, "title": title}
		if epic != "" {
			body["epic"] = epic
		}
		if description != "" {
			body["description"] = description
		}
		s.must(201, AdminToken, "POST", "/api/v1/projects/"+project+"/items", body, &it)
		tk := &ticket{Key: it.Key, Number: it.Number, Type: typ, Epic: epic}
		s.items = append(s.items, tk)
		s.byKey[tk.Key] = tk
		return tk
	}
	var epics []*ticket
	for e := range s.o.Epics {
		epics = append(epics, create(BalletMerges, "epic", fmt.Sprintf("epic %d", e), "", ""))
	}
	for i := 1; i <= s.o.Tickets; i++ {
		typ := "task"
		if i%5 == 0 {
			typ = "bug"
		}
		epic, project := "", BalletMerges
		switch {
		case i%3 == 0:
			epic = epics[i%len(epics)].Key
		case i%2 == 0:
			project = HumansMerge // a third of the tickets
		}
		s.tickets = append(s.tickets, create(project, typ, fmt.Sprintf("ticket %d", i), epic, ""))
	}
	// Blockers: a DAG (edges from earlier tickets), depth one among
	// tickets, plus two epics blocked by a ticket each. Deliberately
	// escalated tickets block nothing.
	block := func(item, blocker *ticket) {
		if Escalates(blocker.Number) || slices.Contains(item.BlockedBy, blocker.Key) {
			return
		}
		status, b, err := s.api.call(nil, 60*time.Second, AdminToken, "POST", "/api/v1/items/"+item.Key+"/blockers/"+blocker.Key, nil)
		if err != nil || status != 201 {
			s.t.Fatalf("block %s by %s: %d %s %v", item.Key, blocker.Key, status, b, err)
		}
		item.BlockedBy = append(item.BlockedBy, blocker.Key)
	}
	for i := 9; i <= len(s.tickets); i++ {
		if i%4 == 1 {
			block(s.tickets[i-1], s.tickets[i-1-7])
			block(s.tickets[i-1], s.tickets[i-1-5])
		}
	}
	block(epics[0], s.tickets[1])
	if len(epics) > 1 {
		block(epics[1], s.tickets[6])
	}
	if s.o.Claude != "" {
		for i := 1; i <= agentTasks+1; i++ {
			typ, desc := "task", agentTask(i)
			if i > agentTasks {
				typ, desc = "bug", "The button has the wrong colour."
			}
			s.tickets = append(s.tickets, create(Agents, typ, fmt.Sprintf("agent ticket %d", i), "", desc))
			s.sum.AgentTickets++
		}
	}
	if s.gitea != nil {
		for i := 1; i <= giteaTickets; i++ {
			s.tickets = append(s.tickets, create(OnGitea, "task", fmt.Sprintf("gitea ticket %d", i), "", ""))
			s.sum.GiteaTickets++
		}
	}
	for _, tk := range s.items {
		var it itemView
		s.must(200, AdminToken, "GET", "/api/v1/items/"+tk.Key, nil, &it)
		s.must(200, AdminToken, "PATCH", "/api/v1/items/"+tk.Key, map[string]any{"version": it.Version, "state": "ready"}, nil)
	}
	edges := 0
	for _, tk := range s.items {
		edges += len(tk.BlockedBy)
	}
	s.sum.Tickets = len(s.tickets)
	s.logf("setup: %d tickets, %d epics, %d blockers", len(s.tickets), len(epics), edges)
	var tok, agentTok struct{ Token string }
	s.must(201, AdminToken, "POST", "/api/v1/tokens", map[string]any{"name": "failuretest-runner", "kind": "runner"}, &tok)
	if s.o.Claude != "" {
		s.must(201, AdminToken, "POST", "/api/v1/tokens", map[string]any{"name": "failuretest-agents", "kind": "runner"}, &agentTok)
	}
	return tok.Token, agentTok.Token
}

func (s *suite) startRunner(token string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work := filepath.Join(s.dir, "runner")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	s.runner = &runnerProc{self: self, logPath: filepath.Join(s.dir, "runner.log"), env: []string{
		RunnerEnv + "=1", envCore + "=http://" + s.core.addr, envToken + "=" + token, envBare + "=" + s.repo.Bare,
		envWork + "=" + work, fmt.Sprintf("%s=%d", envWorkers, s.o.Workers)}}
	if s.gitea != nil {
		s.runner.env = append(s.runner.env, envGitea+"="+s.gitea.pushURL)
	}
	if s.runner.log, err = os.Create(s.runner.logPath); err != nil {
		return err
	}
	return s.runner.start()
}
