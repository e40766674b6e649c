package failuretest

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

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
	// Checks counts the named checks run (the end state's, the agent and
	// Gitea tickets', and whether enough happened); Failed names those
	// that failed.
	Checks int
	Failed []string
}

// Line is the summary line CI shows.
func (s Summary) Line() string {
	return fmt.Sprintf("failure suite (%s): tickets=%d kills=%d resumed=%d escalated=%d duplicates=%d ballet_merges=%d human_merges=%d "+
		"agent_tickets=%d agent_sessions=%d agent_kills=%d agent_runner_kills=%d checkpoints_restored=%d orphans=%d "+
		"gitea_tickets=%d gitea_prs=%d gitea_merges=%d duplicate_prs=%d double_merges=%d forge_kills=%d checks=%d failed=%s", s.Engine,
		s.Tickets, s.Kills, s.Resumed, s.Escalated, s.Duplicates, s.BalletMerge, s.HumanMerge,
		s.AgentTickets, s.AgentSessions, s.AgentKills, s.AgentRunnerKills, s.CheckpointsRestored, s.Orphans,
		s.GiteaTickets, s.GiteaPRs, s.GiteaMerges, s.DuplicatePRs, s.DoubleMerges, s.ForgeKills, s.Checks, s.failed())
}

// failed names the checks that failed, "none" when none did.
func (s Summary) failed() string {
	if len(s.Failed) == 0 {
		return "none"
	}
	return strings.Join(s.Failed, ",")
}

// harnessChecks guard against a vacuous pass: the run must have done what
// the suite claims (those of the agent and the Gitea tickets only with
// them).
var harnessChecks = []check{
	{name: "enough-happened", guards: "Core died at enough fault points, the runner mid-run and (rqlite) the leader once; enough tickets " +
		"ended done, some of them after a Core kill, merged by Ballet and by humans", run: checkEnoughHappened},
	{name: "enough-happened-to-agents", guards: "the agent tickets' kills were all made, a session began from its checkpoint, a ticket " +
		"ended done and a question was answered", run: checkAgentsHappened, when: func(s *suite) bool { return s.agents != nil }},
	{name: "enough-happened-on-gitea", guards: "Core died at each of the Gitea client's fault points, and a pull request was merged",
		run: checkGiteaHappened, when: func(s *suite) bool { return s.gitea != nil }},
}

func checkEnoughHappened(s *suite, _ *endState, r *report) {
	if s.sum.FaultKills < minFaultKills || s.sum.RunnerKills < 1 || (s.o.Engine == "rqlite" && s.sum.LeaderKills != 1) || s.sum.Done < len(s.tickets)/3 ||
		s.sum.Resumed == 0 || s.sum.BalletMerge == 0 || s.sum.HumanMerge == 0 {
		r.bad("HARNESS: too little happened to trust this run: %d kills at fault points (want ≥ 10), %d runner kills (≥ 1), "+
			"%d rqlite leader kills (1 on rqlite), %d tickets done (≥ %d), %d of them caught by a Core kill (≥ 1), %d merges by Ballet (≥ 1), "+
			"%d by humans (≥ 1)", s.sum.FaultKills, s.sum.RunnerKills, s.sum.LeaderKills, s.sum.Done, len(s.tickets)/3, s.sum.Resumed,
			s.sum.BalletMerge, s.sum.HumanMerge)
	}
}

// checkAgentsHappened: a kill of the agent CLI and of the real runner
// while a session of each agent stage was mid-work, a session that began
// from its checkpoint, a ticket done (merged by Ballet), a question
// answered.
func checkAgentsHappened(s *suite, _ *endState, r *report) {
	var missing []string
	for _, k := range s.agentPlan {
		missing = append(missing, k.Kind+"@"+k.Stage)
	}
	if len(missing) == 0 && s.sum.CheckpointsRestored > 0 && s.sum.AgentDone > 0 && s.sum.Answers > 0 {
		return
	}
	r.bad("HARNESS: too little happened to the agent tickets to trust this run: kills not made (no session of the "+
		"stage was mid-work in time): %v; %d sessions began from a checkpoint (≥ 1), %d agent tickets done (≥ 1), %d rounds of answers (≥ 1)",
		missing, s.sum.CheckpointsRestored, s.sum.AgentDone, s.sum.Answers)
}

func checkGiteaHappened(s *suite, _ *endState, r *report) {
	var missing []string
	for _, p := range giteaPoints {
		if s.forgeFired[p] == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 || s.sum.GiteaMerges == 0 {
		r.bad("HARNESS: too little happened to the Gitea tickets to trust this run: Core never died at %v "+
			"(each wants ≥ 1), %d pull requests merged (≥ 1)", missing, s.sum.GiteaMerges)
	}
}

// report prints the summary line (and appends it to
// $BALLET_FAILURETEST_SUMMARY), logs the run's figures, and fails the test
// with the problems found.
func (s *suite) report(problems []string) {
	t, o := s.t, s.o
	s.sum.Kills = s.sum.FaultKills + s.sum.RandomKills + s.sum.RunnerKills + s.sum.LeaderKills
	sort.Strings(s.sum.NotFired)
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
		t.Fatalf("FAILURE SUITE (%s): %d problems in the checks %s — product bugs unless the harness is wrong; do not weaken these checks:\n  %s",
			o.Engine, len(problems), s.sum.failed(), strings.Join(problems, "\n  "))
	}
}
