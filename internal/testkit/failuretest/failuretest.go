// Package failuretest is the failure suite of ADR-0016 ("Validation"): it
// runs the real `ballet` binary — built with the ballet_testforge tag, so
// that Ballet merges on the plain-git forge (gitforge.Merging) — and a test
// runner process (this test binary re-executed in runner mode, speaking the
// runner API) over many tickets — epics, blockers, human stages, iterations,
// merges by Ballet (project ACME, merge policy auto) and by humans (project
// HUM, manual) — while it kills Core with SIGKILL at each pipeline step
// (fault points armed through BALLET_FAULT, see internal/fault, including
// forge.merged right after a merge by Ballet), at random moments, kills the
// runner mid-run and, on rqlite, the cluster's leader once. Core's scheduler
// alone starts the tickets. The harness plays the humans: it approves human
// stages and merges a HUM ticket's branch when its flow waits for the merge;
// it answers no question of ACME and HUM, so their escalations stay.
//
// A subset of the tickets (project AGT, see Agents) is worked by the real
// `ballet runner` with real claude-code sessions under bubblewrap against
// the fake model (internal/fakemodel; each ticket's description picks slow
// work on a file of its own, the bug's fix stage asks a blocking question)
// and pushes to the same bare repository, where Ballet merges them. Besides
// Core's kills, the harness kills the real runner and, separately, a
// session's agent CLI (its process groups, found by the BALLET_SESSION
// marker) while a session of each agent stage (implement, review, verify)
// is mid-work with a checkpoint pushed; it answers an AGT ticket's
// questions (at most maxAnswers times), so a ticket a kill escalated
// resumes.
//
// At the end it reads the database directly and checks that every ticket
// ended done or escalated (or waits behind an escalated blocker), that every
// escalation and every stage that ended off the runner's script is explained
// (scripted, or a run that a kill cost), that tickets caught by a Core kill
// resumed (at least one of them reached done), that no run, flow
// transition or merge happened twice and no two runs of a flow overlapped,
// that every change has its one event and seq has no gaps, and that no job
// is left behind without a reason; for the agent tickets also that no run
// was leased twice nor two sessions of a ticket ran at once, that the next
// session of a stage whose session was killed mid-work began from its
// checkpoint, and that no agent process is left (after each kill of the
// real runner, and at the end). Run prints one summary line, with the
// agent figures (sessions, kills of agent CLIs and of the real runner,
// checkpoints restored, orphans).
package failuretest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// AdminToken is the bootstrap (platform-admin) token of the suite's Core.
const AdminToken = "failuretest-bootstrap-token-0123456789"

// The suite's projects: Ballet merges ACME's tickets (merge policy auto),
// humans merge HUM's (manual).
const (
	BalletMerges = "ACME"
	HumansMerge  = "HUM"
)

var projects = []string{BalletMerges, HumansMerge}

// polled are the projects whose flows and items the harness polls.
var polled = []string{BalletMerges, HumansMerge, Agents, OnGitea}

// projectOf returns the project key of a ticket key.
func projectOf(key string) string {
	p, _, _ := strings.Cut(key, "-")
	return p
}

// Options tune a run of the suite.
type Options struct {
	Engine    string        // "sqlite" or "rqlite"
	Binary    string        // the ballet binary
	Tickets   int           // at least 50
	Epics     int           // epics the tickets are spread over
	Workers   int           // runs the runner works at once
	Limit     int           // the project's concurrency_limit
	KillPhase time.Duration // how long kills go on
	Deadline  time.Duration // hang guard: how long everything may take to settle
	FaultWait time.Duration // how long an armed fault point may take to fire
	Seed      uint64
	LogDir    string // where the logs go (a temporary folder when empty)
	// Claude is the claude-code executable the real runner drives for
	// project AGT ("": no agent tickets).
	Claude string
	// Gitea is the Gitea of project GTA (nil: no Gitea tickets); each run
	// seeds its own repository and users there.
	Gitea *giteatest.Server
}

func (o *Options) defaults() {
	if o.Tickets == 0 {
		o.Tickets = 60
	}
	if o.Epics == 0 {
		o.Epics = 4
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Limit == 0 {
		o.Limit = 8
	}
	if o.KillPhase == 0 {
		o.KillPhase = 60 * time.Second
	}
	if o.Deadline == 0 {
		o.Deadline = 5 * time.Minute
	}
	if o.FaultWait == 0 {
		o.FaultWait = 5 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
}

// Summary is what a run did and found.
type Summary struct {
	Engine      string
	Tickets     int
	Kills       int // all of them: fault points, random, runner, rqlite leader
	FaultKills  int // Core died at an armed fault point
	RandomKills int // the harness killed Core
	RunnerKills int
	LeaderKills int
	CoreExits   int // Core exited by itself (failed to start) and was started again
	Resumed     int // tickets active at a Core kill that ended done
	Done        int
	Escalated   int            // flow waiting for an answer, or failed
	Explained   map[string]int // escalations by their explanation (see explain)
	Held        int            // ready tickets behind an escalated blocker
	// Detours counts stages of done tickets that ended off the script
	// (and went back or resumed); UnexplainedDetours those no kill explains.
	Detours, UnexplainedDetours int
	Duplicates                  int
	BalletMerge                 int      // merges by Ballet (project ACME)
	HumanMerge                  int      // merges by the harness's humans (project HUM)
	Fired                       []string // fault points that fired
	NotFired                    []string // armed points that did not fire in time
	Runs                        int
	Events                      int
	// MaxRunningAtStart is the most flows of a project running when another
	// of it started (informational; compare with the project's limit).
	MaxRunningAtStart int
	// The agent tickets (project AGT, the real runner and claude-code):
	// sessions the runner started, kills of an agent CLI and of the real
	// runner, sessions that began from their stage's checkpoint, the
	// harness's answers, and the agent processes found alive after their
	// runner's death or at the end (orphans).
	AgentTickets, AgentDone, AgentSessions, AgentKills, AgentRunnerKills int
	CheckpointsRestored, Answers, Orphans                                int
	// The Gitea tickets (project GTA): pull requests of their branches on
	// Gitea, merged ones, pull requests beyond one per branch and merges
	// beyond one, and Core's kills at the Gitea client's fault points.
	GiteaTickets, GiteaPRs, GiteaMerges, DuplicatePRs, DoubleMerges, ForgeKills int
	Elapsed                                                                     time.Duration
}

// Line is the summary line CI shows.
func (s Summary) Line() string {
	return fmt.Sprintf("failure suite (%s): tickets=%d kills=%d resumed=%d escalated=%d duplicates=%d ballet_merges=%d human_merges=%d "+
		"agent_tickets=%d agent_sessions=%d agent_kills=%d agent_runner_kills=%d checkpoints_restored=%d orphans=%d "+
		"gitea_tickets=%d gitea_prs=%d gitea_merges=%d duplicate_prs=%d double_merges=%d forge_kills=%d", s.Engine,
		s.Tickets, s.Kills, s.Resumed, s.Escalated, s.Duplicates, s.BalletMerge, s.HumanMerge,
		s.AgentTickets, s.AgentSessions, s.AgentKills, s.AgentRunnerKills, s.CheckpointsRestored, s.Orphans,
		s.GiteaTickets, s.GiteaPRs, s.GiteaMerges, s.DuplicatePRs, s.DoubleMerges, s.ForgeKills)
}

// ticket is a ticket or epic as the harness created it.
type ticket struct {
	Key       string
	Number    int64
	Type      string
	Epic      string   // the epic's key
	BlockedBy []string // keys
}

type suite struct {
	// killedJobs: dead jobs that lost every attempt to a Core kill, by the
	// flow their payload names (killedEachAttempt).
	killedJobs map[string]dbJob
	t          *testing.T
	o          Options
	rng        *rand.Rand
	dir        string
	repo       *apitest.GitRepo
	core       *coreProc
	runner     *runnerProc
	api        *client
	doc        *openapitest.Doc // the OpenAPI document Core serves: every event's payload must match it

	cluster *rqlitetest.Cluster
	dbAddr  string // SQLite file or rqlite URLs
	harness *os.File
	began   time.Time
	items   []*ticket // creation order, epics first
	byKey   map[string]*ticket
	tickets []*ticket // tickets only
	leaders []outage  // rqlite leader kills until the node's restart

	runnerKills []runnerKill // read at the end, for explain
	agentKills  []runnerKill // of the real runner, read at the end
	outages     []outage     // of Core, the runner and the rqlite leader, read at the end

	flows      map[string]flowView // latest poll, by ticket
	states     map[string]string   // latest poll of item states, by key
	approvedAt map[string]int64    // flow version approved, by ticket
	merged     map[string]int      // MergeBranch calls, by ticket
	askedHuman map[string]bool     // ACME tickets seen waiting for a human merge
	mergedIter map[string]int      // the iteration the merge was made in
	hit        map[string]bool     // tickets active at some Core kill
	anomalies  []string            // duplicates seen while driving

	agents        *agentRunner   // the real runner of project AGT (nil without agent tickets)
	agentPlan     []agentKill    // kills still to make
	agentRestart  time.Time      // when to start the killed real runner again
	agentKilledAt time.Time      // the last kill of the plan
	agentKillsOf  map[string]int // plan kills, by ticket
	answered      map[string]int // rounds of answers, by AGT ticket
	answeredAt    map[string]int64
	orphans       []string // agent processes alive after their runner's death, or at the end
	exits         []string // Core exiting by itself

	gitea        *giteaSide         // project GTA's repository (nil without Gitea tickets)
	forgePlan    []string           // the Gitea client's fault points still to arm
	forgeUntil   time.Time          // until when they are armed
	forgeFired   map[string]int     // by point
	prs          map[string]giteaPR // the open (else newest) pull request of each GTA ticket, as last read
	prsRead      time.Time
	ciSet        map[string]string // head → the state the harness's CI reported on it
	ciFailedIter map[string]int    // the iteration whose merge stage CI failed, by ticket
	approved     map[string]bool   // "KEY@head" the reviewer approved
	approvedArm  int               // approvals since Core's last start

	sum Summary
}

type flowView struct {
	Ticket    string `json:"ticket"`
	Pipeline  string `json:"pipeline"`
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Status    string `json:"status"`
	Waiting   string `json:"waiting"`
	Run       string `json:"run"`
	Version   int64  `json:"version"`
}

type itemView struct {
	Key       string   `json:"key"`
	Number    int64    `json:"number"`
	Type      string   `json:"type"`
	State     string   `json:"state"`
	Epic      *string  `json:"epic"`
	BlockedBy []string `json:"blocked_by"`
	Version   int64    `json:"version"`
}

// Run runs the suite on one engine and checks the end state; failures are
// reported on t. It returns the summary (also printed with fmt.Println).
func Run(t *testing.T, o Options) Summary {
	o.defaults()
	s := &suite{t: t, o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x5eed)), flows: map[string]flowView{}, states: map[string]string{},
		approvedAt: map[string]int64{}, merged: map[string]int{}, mergedIter: map[string]int{}, askedHuman: map[string]bool{}, hit: map[string]bool{},
		byKey: map[string]*ticket{}, agentKillsOf: map[string]int{}, answered: map[string]int{}, answeredAt: map[string]int64{},
		forgeFired: map[string]int{}, prs: map[string]giteaPR{}, ciSet: map[string]string{}, ciFailedIter: map[string]int{}, approved: map[string]bool{}}
	s.sum.Engine = o.Engine
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
		coreEnv = append(coreEnv, giteaCredEnv+"="+s.gitea.repo.Owner.Token)
	}
	if s.core, err = newCoreProc(o.Binary, s.dir, storage, coreEnv); err != nil {
		t.Fatal(err)
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
	runnerToken, agentToken := s.setup()
	if err := s.startRunner(runnerToken); err != nil {
		t.Fatal(err)
	}
	if o.Claude != "" {
		s.agentPlan = agentKillPlan()
		if err := s.startAgents(o.Claude, agentToken); err != nil {
			t.Fatal(err)
		}
	}
	s.drive()
	if err := s.runner.kill(); err != nil {
		t.Fatal(err)
	}
	if s.agents != nil {
		// A drain: no session runs any more.
		if err := s.agents.stop(); err != nil {
			t.Error(err)
		}
	}
	if err := s.core.stop(); err != nil {
		t.Fatal(err)
	}
	problems := s.check()
	if s.agents != nil {
		problems = append(problems, s.agentsHappened()...)
	}
	// The suite must have done what it claims: no vacuous pass.
	if s.sum.FaultKills < 10 || s.sum.RunnerKills < 1 || (o.Engine == "rqlite" && s.sum.LeaderKills != 1) || s.sum.Done < len(s.tickets)/3 ||
		s.sum.Resumed == 0 || s.sum.BalletMerge == 0 || s.sum.HumanMerge == 0 {
		problems = append(problems, fmt.Sprintf("HARNESS: too little happened to trust this run: %d kills at fault points (want ≥ 10), %d runner kills (≥ 1), "+
			"%d rqlite leader kills (1 on rqlite), %d tickets done (≥ %d), %d of them caught by a Core kill (≥ 1), %d merges by Ballet (≥ 1), "+
			"%d by humans (≥ 1)", s.sum.FaultKills, s.sum.RunnerKills, s.sum.LeaderKills, s.sum.Done, len(s.tickets)/3, s.sum.Resumed,
			s.sum.BalletMerge, s.sum.HumanMerge))
	}
	if s.gitea != nil {
		var missing []string
		for _, p := range giteaPoints {
			if s.forgeFired[p] == 0 {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 || s.sum.GiteaMerges == 0 {
			problems = append(problems, fmt.Sprintf("HARNESS: too little happened to the Gitea tickets to trust this run: Core never died at %v "+
				"(each wants ≥ 1), %d pull requests merged (≥ 1)", missing, s.sum.GiteaMerges))
		}
	}
	s.sum.Elapsed = time.Since(s.began).Round(time.Second)
	line := s.sum.Line()
	fmt.Println(line)
	t.Log(line)
	// go test ./... shows a passing package's output only with -v: CI can
	// collect the lines from this file instead.
	if path := os.Getenv("BALLET_FAILURETEST_SUMMARY"); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
	t.Logf("failure suite (%s): done=%d (resumed after a Core kill %d; detours %d, unexplained %d) escalated=%d %v held=%d; kills: %d at fault points, "+
		"%d random, %d runner, %d rqlite leader; merges: %d by Ballet, %d by humans; runs=%d events=%d; at most %d flows running at a start "+
		"(limit %d per project); %s",
		o.Engine, s.sum.Done, s.sum.Resumed, s.sum.Detours, s.sum.UnexplainedDetours, s.sum.Escalated, s.sum.Explained, s.sum.Held,
		s.sum.FaultKills, s.sum.RandomKills, s.sum.RunnerKills,
		s.sum.LeaderKills, s.sum.BalletMerge, s.sum.HumanMerge, s.sum.Runs, s.sum.Events, s.sum.MaxRunningAtStart, o.Limit, s.sum.Elapsed)
	t.Logf("failure suite (%s): fault points fired: %s; armed but not reached in %s: %s", o.Engine, strings.Join(s.sum.Fired, " "),
		o.FaultWait, strings.Join(s.sum.NotFired, " "))
	if s.agents != nil {
		t.Logf("failure suite (%s): agent tickets (AGT, the real runner, claude-code): %d, %d done; %d sessions, %d agent CLIs and %d runners "+
			"killed mid-work, %d sessions began from their checkpoint, %d rounds of answers, %d orphans", o.Engine, s.sum.AgentTickets, s.sum.AgentDone,
			s.sum.AgentSessions, s.sum.AgentKills, s.sum.AgentRunnerKills, s.sum.CheckpointsRestored, s.sum.Answers, s.sum.Orphans)
	}
	if len(s.exits) > 0 {
		t.Logf("failure suite (%s): Core exited by itself %d times and was started again, as a supervisor would:\n  %s", o.Engine,
			len(s.exits), strings.Join(s.exits, "\n  "))
	}
	if len(problems) > 0 {
		t.Fatalf("FAILURE SUITE (%s): %d problems — product bugs unless the harness is wrong; do not weaken these checks:\n  %s",
			o.Engine, len(problems), strings.Join(problems, "\n  "))
	}
	return s.sum
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func (s *suite) logf(format string, args ...any) {
	fmt.Fprintf(s.harness, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
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
			"repository":        map[string]any{"forge": "gitea", "url": s.gitea.repo.CloneURL, "credentials_ref": "env:" + giteaCredEnv},
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

// poll reads every flow and item state of both projects (ok=false when
// Core was down).
func (s *suite) poll() bool {
	alive := func() bool { return !s.core.dead() }
	flows := map[string]flowView{}
	states := map[string]string{}
	for _, p := range polled {
		if (p == Agents && s.agents == nil) || (p == OnGitea && s.gitea == nil) {
			continue
		}
		status, b, err := s.api.call(alive, 20*time.Second, AdminToken, "GET", "/api/v1/projects/"+p+"/flows?limit=1000", nil)
		if err != nil || status != 200 {
			s.logf("poll flows of %s: %d %v", p, status, err)
			return false
		}
		var fl struct{ Flows []flowView }
		if err := json.Unmarshal(b, &fl); err != nil {
			s.t.Fatalf("flows: %v: %s", err, b)
		}
		for _, f := range fl.Flows {
			if _, ok := flows[f.Ticket]; !ok { // newest first
				flows[f.Ticket] = f
			}
		}
		after := int64(0)
		for {
			status, b, err := s.api.call(alive, 20*time.Second, AdminToken, "GET", fmt.Sprintf("/api/v1/projects/%s/items?limit=200&after=%d", p, after), nil)
			if err != nil || status != 200 {
				s.logf("poll items of %s: %d %v", p, status, err)
				return false
			}
			var page struct {
				Items     []itemView
				NextAfter *int64 `json:"next_after"`
			}
			if err := json.Unmarshal(b, &page); err != nil {
				s.t.Fatalf("items: %v: %s", err, b)
			}
			for _, it := range page.Items {
				states[it.Key] = it.State
			}
			if page.NextAfter == nil {
				break
			}
			after = *page.NextAfter
		}
	}
	s.flows, s.states = flows, states
	return true
}

// escalated reports whether a polled flow was escalated: it waits for an
// answer (a blocking question, flow.stuck) or failed.
func escalated(f flowView) bool {
	return (f.Status == "waiting" && f.Waiting == "answer") || f.Status == "failed"
}

// blockersOpen lists the blockers of a ticket (its own and its epic's)
// that are neither done nor cancelled in states.
func (s *suite) blockersOpen(tk *ticket, states map[string]string) []string {
	var open []string
	check := func(keys []string) {
		for _, k := range keys {
			if st := states[k]; st != "done" && st != "cancelled" {
				open = append(open, k)
			}
		}
	}
	check(tk.BlockedBy)
	if tk.Epic != "" {
		check(s.byKey[tk.Epic].BlockedBy)
	}
	return open
}

// settled says whether every ticket is done, escalated or held behind an
// escalated (or held) blocker, and how many flows are running.
func (s *suite) settled() (bool, int, []string) {
	running := 0
	for _, f := range s.flows {
		if f.Status == "running" {
			running++
		}
	}
	final := map[string]bool{} // done or escalated
	for _, tk := range s.tickets {
		f, ok := s.flows[tk.Key]
		if ok && (f.Status == "done" || (escalated(f) && !s.willAnswer(tk.Key, f))) {
			final[tk.Key] = true
		}
	}
	var open []string
	for _, tk := range s.tickets {
		if final[tk.Key] || s.isHeld(tk, final, map[string]bool{}) {
			continue
		}
		open = append(open, tk.Key)
	}
	busy := s.agents != nil && s.agents.busy()
	return len(open) == 0 && running == 0 && !busy, running, open
}

// willAnswer reports whether the harness is still to answer the question
// a flow waits for: an agent ticket's, fewer than maxAnswers times.
func (s *suite) willAnswer(key string, f flowView) bool {
	return projectOf(key) == Agents && f.Status == "waiting" && f.Waiting == "answer" && s.answered[key] < maxAnswers
}

// isHeld: a ticket without a flow that is blocked by something escalated
// or itself held.
func (s *suite) isHeld(tk *ticket, final map[string]bool, seen map[string]bool) bool {
	if seen[tk.Key] {
		return false
	}
	seen[tk.Key] = true
	if _, started := s.flows[tk.Key]; started {
		return false
	}
	for _, k := range s.blockersOpen(tk, s.states) {
		b := s.byKey[k]
		if final[k] && s.flows[k].Status != "done" {
			return true
		}
		if b.Type != "epic" && s.isHeld(b, final, seen) {
			return true
		}
	}
	return false
}

// markKill remembers the tickets active at a Core kill, to count the ones
// that resumed to done.
func (s *suite) markKill() {
	for k, f := range s.flows {
		if f.Status == "running" || f.Status == "waiting" {
			s.hit[k] = true
		}
	}
}

// faultPlan lists the fault points to arm, each at its k-th hit: two
// rounds over every commit point the scenario passes and the point right
// after a merge by Ballet, the first early (k = 1…4), the second later
// (k = 3…8).
func (s *suite) faultPlan() []string {
	points := []string{"commit:flow.started", "commit:ticket.state_changed", "commit:flow.stage_started", "commit:run.created",
		"commit:run.started", "commit:run.reported", "commit:run.finished", "commit:flow.stage_finished",
		"commit:flow.waiting", "commit:flow.done", gitforge.FaultMerged}
	var plan []string
	for round := range 2 {
		for _, p := range points {
			plan = append(plan, fmt.Sprintf("%s:%d", p, 1+2*round+s.rng.IntN(4+round)))
		}
	}
	return plan
}

// doneShare is the share of tickets whose flow is done, as polled.
func (s *suite) doneShare() float64 {
	n := 0
	for _, f := range s.flows {
		if f.Status == "done" {
			n++
		}
	}
	return float64(n) / float64(len(s.tickets))
}

// drive runs the kill schedule and plays the humans until every ticket has
// settled, and fails with the unsettled tickets at the deadline (a hang
// guard).
func (s *suite) drive() {
	t := s.t
	start := time.Now()
	killEnd := start.Add(s.o.KillPhase)
	deadline := start.Add(s.o.Deadline)
	plan := s.faultPlan()
	next := 0
	nextRandom := time.Time{}
	// The runner dies mid-run as the tickets progress, and so does the
	// rqlite leader (once).
	runnerKillAt := []float64{0.1, 0.35, 0.6}
	var runnerRestart, leaderRestart time.Time
	var leader *rqlitetest.Node
	leaderAt := 0.3
	if s.gitea != nil {
		// The Gitea client's points are armed when the tickets get there,
		// which may take longer than the kill phase.
		s.forgePlan, s.forgeUntil = s.giteaPlan(), start.Add(2*s.o.KillPhase)
	}
	restart := func(reason string) {
		f := ""
		if time.Now().Before(s.forgeUntil) {
			f = s.nextForgePoint()
		}
		if f == "" && time.Now().Before(killEnd) && next < len(plan) {
			f, next = plan[next], next+1
		}
		s.approvedArm = 0
		s.logf("core: %s; restart with BALLET_FAULT=%q", reason, f)
		if err := s.core.start(f); err != nil {
			t.Fatal(err)
		}
		if f == "" && next >= len(plan) {
			nextRandom = time.Now().Add(time.Duration(1000+s.rng.IntN(2500)) * time.Millisecond)
		}
	}
	// Arm the first fault point.
	if err := s.core.kill(); err != nil {
		t.Fatal(err)
	}
	s.sum.RandomKills++
	restart("killed to arm the first fault point")
	var settledSince time.Time
	for {
		now := time.Now()
		killing := now.Before(killEnd)
		forging := now.Before(s.forgeUntil)
		if now.After(deadline) {
			s.failUnsettled()
			return
		}
		switch {
		case s.core.dead():
			f := s.core.armed()
			if sigkill, how := s.core.killed(); !sigkill {
				// Core stopped by itself: a supervisor (systemd) would
				// start it again, so the harness does, a few times.
				s.sum.CoreExits++
				last := lastLine(tailFile(s.core.logPath, 2000))
				s.exits = append(s.exits, fmt.Sprintf("%s %s: %s", time.Now().Format("15:04:05.000"), how, last))
				if !strings.Contains(last, "start core") || s.sum.CoreExits > 20 {
					t.Fatalf("core exited by itself (%s), not at a fault point:\n%s", how, tailFile(s.core.logPath, 6000))
				}
				time.Sleep(500 * time.Millisecond)
				s.logf("core: exited by itself at start (%s): %s; start again with BALLET_FAULT=%q", how, last, f)
				if err := s.core.start(f); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if f == "" {
				t.Fatalf("core died of SIGKILL without an armed fault point:\n%s", tailFile(s.core.logPath, 6000))
			}
			s.sum.FaultKills++
			s.sum.Fired = append(s.sum.Fired, strings.TrimPrefix(f, "commit:"))
			if isForgePoint(f) {
				s.sum.ForgeKills++
				s.forgeFired[pointOf(f)]++
			}
			s.markKill()
			restart("died at fault point " + f)
			continue
		case s.core.armed() != "" && !isForgePoint(s.core.armed()) && (!killing || s.core.since() > s.o.FaultWait),
			isForgePoint(s.core.armed()) && (!forging || s.core.since() > forgeFaultWait):
			f := s.core.armed()
			s.sum.NotFired = append(s.sum.NotFired, strings.TrimPrefix(f, "commit:"))
			if err := s.core.kill(); err != nil {
				t.Fatal(err)
			}
			s.sum.RandomKills++
			s.markKill()
			wait := s.o.FaultWait
			if isForgePoint(f) {
				wait = forgeFaultWait
			}
			restart(fmt.Sprintf("fault point %s did not fire within %s: killed", f, wait))
			continue
		case killing && s.core.armed() == "" && next >= len(plan) && now.After(nextRandom):
			if err := s.core.kill(); err != nil {
				t.Fatal(err)
			}
			s.sum.RandomKills++
			s.markKill()
			restart("random SIGKILL")
			continue
		case forging && s.core.armed() == "" && s.forgeReadyAny():
			if err := s.core.kill(); err != nil {
				t.Fatal(err)
			}
			s.sum.RandomKills++
			s.markKill()
			restart("killed to arm a point of the Gitea client")
			continue
		}
		if s.runner.dead() {
			if runnerRestart.IsZero() {
				t.Fatalf("the runner exited by itself:\n%s", tailFile(s.runner.logPath, 4000))
			}
			if now.After(runnerRestart) {
				s.logf("runner: restart")
				if err := s.runner.start(); err != nil {
					t.Fatal(err)
				}
				runnerRestart = time.Time{}
			}
		} else if n := s.runner.inflightRuns(); killing && len(runnerKillAt) > 0 && s.doneShare() >= runnerKillAt[0] && n > 0 {
			if err := s.runner.kill(); err != nil {
				t.Fatal(err)
			}
			kills, _ := s.runner.record()
			s.logf("runner: SIGKILL with %d runs in flight: %v", n, kills[len(kills)-1].Runs)
			s.sum.RunnerKills++
			runnerKillAt = runnerKillAt[1:]
			runnerRestart = now.Add(time.Duration(300+s.rng.IntN(1500)) * time.Millisecond)
		}
		if s.agents != nil {
			s.driveAgents(now)
		}
		if s.cluster != nil {
			switch {
			case leader == nil && killing && (s.doneShare() >= leaderAt || now.Sub(start) > s.o.KillPhase/2):
				leader = s.cluster.Leader(t)
				s.logf("rqlite: SIGKILL the leader %s", leader.ID)
				s.cluster.Kill(t, leader)
				s.sum.LeaderKills++
				s.leaders = append(s.leaders, outage{What: "rqlite leader", From: time.Now()})
				leaderRestart = now.Add(3 * time.Second)
			case leader != nil && !leaderRestart.IsZero() && now.After(leaderRestart):
				s.logf("rqlite: restart %s", leader.ID)
				s.cluster.Restart(t, leader)
				s.leaders[len(s.leaders)-1].To = time.Now()
				leaderRestart = time.Time{}
			}
		}
		if !s.poll() {
			continue
		}
		s.actAsHumans()
		if s.gitea != nil {
			s.playForge(now)
		}
		ok, running, open := s.settled()
		if ok && leaderRestart.IsZero() && runnerRestart.IsZero() && s.agentRestart.IsZero() {
			if settledSince.IsZero() {
				settledSince = now
				s.logf("settled (kill phase over: %v)", !killing)
			}
			// Settled for a while: what is still under way (a run's
			// finish, a merge check) has had its chance to move a flow,
			// and the checks read the end state from the database.
			if now.Sub(settledSince) > 3*time.Second {
				if s.core.armed() != "" {
					if err := s.core.kill(); err != nil {
						t.Fatal(err)
					}
					s.sum.RandomKills++
					killEnd, s.forgeUntil = now, now
					restart("settled: restart without a fault point")
					continue
				}
				s.logf("settled for 3 s: done driving after %s", time.Since(start).Round(time.Millisecond))
				return
			}
		} else {
			if !settledSince.IsZero() {
				s.logf("unsettled again: %d running, open %v", running, open)
			}
			settledSince = time.Time{}
		}
		time.Sleep(150 * time.Millisecond) // polling real processes
	}
}

// actAsHumans approves human stages and merges branches whose flow waits
// for a human merge (once per ticket).
func (s *suite) actAsHumans() {
	alive := func() bool { return !s.core.dead() }
	keys := make([]string, 0, len(s.flows))
	for k := range s.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := s.flows[k]
		switch {
		case f.Status == "waiting" && f.Waiting == "approval" && s.approvedAt[k] != f.Version:
			status, b, err := s.api.call(alive, 10*time.Second, AdminToken, "POST", "/api/v1/items/"+k+"/flow/approve", map[string]any{"comment": "approved by the failure suite"})
			if err != nil {
				return // Core is down: next round
			}
			s.approvedAt[k] = f.Version
			s.logf("approve %s (%s): %d", k, f.Stage, status)
			if status != 200 && status != 409 {
				s.t.Errorf("approve %s: %d %s", k, status, b)
			}
		case s.willAnswer(k, f):
			s.answerAgentQuestions(k, f)
		case f.Status == "waiting" && f.Waiting == "merge" && (projectOf(k) == BalletMerges || projectOf(k) == Agents || projectOf(k) == OnGitea):
			if !s.askedHuman[k] {
				s.askedHuman[k] = true
				msg := fmt.Sprintf("%s waits for a human merge, but Ballet merges %s's tickets (merge policy auto): %+v", k, projectOf(k), f)
				s.anomalies = append(s.anomalies, msg)
				s.logf("ANOMALY: %s", msg)
			}
		case f.Status == "waiting" && f.Waiting == "merge":
			if s.merged[k] > 0 && s.mergedIter[k] == f.Iteration {
				continue // merged: the next check of the merge stage sees it
			}
			if s.merged[k] > 0 {
				msg := fmt.Sprintf("%s waits for a merge again in iteration %d after its merge in iteration %d", k, f.Iteration, s.mergedIter[k])
				s.anomalies = append(s.anomalies, msg)
				s.logf("DUPLICATE: %s", msg)
			}
			if err := s.humanMerge("ballet/" + k); err != nil {
				s.t.Fatal(err)
			}
			s.merged[k]++
			s.mergedIter[k] = f.Iteration
			s.logf("merge ballet/%s (iteration %d)", k, f.Iteration)
		}
	}
}

// humanMerge merges branch into main with a merge commit "merge BRANCH"
// and pushes it, as a person does; when Ballet merged another branch
// meanwhile (the push is refused), the person merges onto the new main
// and pushes again.
func (s *suite) humanMerge(branch string) error {
	work := s.repo.Work
	var err error
	for range 20 {
		for _, args := range [][]string{{"fetch", "-q", "origin"}, {"checkout", "-q", "main"}, {"reset", "-q", "--hard", "origin/main"},
			{"merge", "-q", "--no-ff", "-m", "merge " + branch, "origin/" + branch}} {
			if _, err := gitOut(work, args...); err != nil {
				return err
			}
		}
		if _, err = gitOut(work, "push", "-q", "origin", "main"); err == nil {
			return nil
		}
		s.logf("merge %s: the push was refused (main moved), merging again: %v", branch, err)
	}
	return fmt.Errorf("merge %s: main kept moving: %w", branch, err)
}

// failUnsettled fails the test with the tickets that neither finished nor
// escalated by the deadline: lost tickets.
func (s *suite) failUnsettled() {
	_, running, open := s.settled()
	var b strings.Builder
	for _, k := range open {
		f, ok := s.flows[k]
		tk := s.byKey[k]
		fmt.Fprintf(&b, "\n  %s (%s) ticket %s, blockers open %v, flow %+v (started: %v)", k, tk.Type, s.states[k], s.blockersOpen(tk, s.states), f, ok)
		status, body, err := s.api.call(nil, 10*time.Second, AdminToken, "GET", "/api/v1/items/"+k+"/events?limit=1000", nil)
		if err == nil && status == 200 {
			var page struct {
				Events []struct {
					Seq     int64
					Type    string
					Payload json.RawMessage
				}
			}
			_ = json.Unmarshal(body, &page)
			for _, e := range page.Events {
				fmt.Fprintf(&b, "\n      seq %d %s %s", e.Seq, e.Type, e.Payload)
			}
		}
	}
	var busy []string
	if s.agents != nil {
		busy = s.agents.unfinished()
	}
	s.t.Fatalf("LOST TICKETS: %d tickets neither done nor escalated after %s (%d flows running; agent sessions without a finish: %v):%s",
		len(open), s.o.Deadline, running, busy, b.String())
}
