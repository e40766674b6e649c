// Package failuretest is the failure suite of ADR-0016 ("Validation"): it
// runs the real `ballet` binary — built with the ballet_testforge tag, so
// that Ballet merges on the plain-git forge (gitforge.Merging) — and a test
// runner process (this test binary re-executed in runner mode, speaking the
// runner protocol through apitest.Protocol, the API tests' test runner, to
// a Core with every test Core's token and secrets) over many tickets —
// epics, blockers, human stages, iterations, merges by Ballet (project
// ACME, merge policy auto) and by humans (project HUM, manual) — while it kills Core with SIGKILL at each pipeline step
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
// real runner, and at the end). Each of these is a named check (checks.go);
// Run prints one summary line, with the agent figures (sessions, kills of
// agent CLIs and of the real runner, checkpoints restored, orphans), that
// ends with the number of checks run and the names of those that failed
// ("checks=N failed=none").
//
// The package by responsibility: the world it builds (world.go; the
// processes, procs.go; the test runner, runner.go; the agent and Gitea
// sides, agents.go and gitea.go), driving the tickets (drive.go), the
// humans (humans.go), the faults (faults.go), collecting the end state
// (collect.go), the checks (the tables in checks.go, agentchecks.go and
// giteachecks.go; invariants.go, tickets.go) and the summary (summary.go).
// The event types it reads and arms fault points at are in events.go.
package failuretest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// AdminToken is the bootstrap (platform-admin) token of the suite's Core:
// every test Core's (apitest).
const AdminToken = apitest.BootstrapToken

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
		o.Deadline = 8 * time.Minute
	}
	if o.FaultWait == 0 {
		o.FaultWait = 5 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
}

// suite is one run of the suite: the world it built, what the harness
// did and saw while driving, and the summary.
type suite struct {
	// killedJobs: dead jobs whose claims were lost to Core kills too often in a row, by the
	// flow their payload names (killedEachClaim).
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
	forgeUntil   time.Time          // until when they are armed (at least; forgingAt)
	forgeRetries int                // extra turns given to points that did not fire
	forgeFired   map[string]int     // by point
	prs          map[string]giteaPR // the open (else newest) pull request of each GTA ticket, as last read
	prsRead      time.Time
	ciSet        map[string]string // head → the state the harness's CI reported on it
	ciFailedIter map[string]int    // the iteration whose merge stage CI failed, by ticket
	approved     map[string]bool   // "KEY@head" the reviewer approved
	approvedArm  int               // approvals since Core's last start

	sched schedule // the kill schedule, while drive runs

	sum Summary
}

// Run runs the suite on one engine and checks the end state; failures are
// reported on t. It returns the summary (also printed with fmt.Println).
func Run(t *testing.T, o Options) Summary {
	o.defaults()
	s := newSuite(t, o)
	s.build()
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
	problems = append(problems, s.runChecks(harnessChecks, nil)...)
	s.report(problems)
	return s.sum
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func (s *suite) logf(format string, args ...any) {
	fmt.Fprintf(s.harness, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
