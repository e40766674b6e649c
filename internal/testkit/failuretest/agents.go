package failuretest

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/procgroup"
	"github.com/ballet/ballet/internal/runner/proc"
)

// Agents is the project whose tickets the real `ballet runner` works, with
// real claude-code sessions against the fake model (internal/fakemodel)
// and pushes to the suite's bare repository; Ballet merges them (merge
// policy auto). The test runner takes none of its runs: it leases only
// opencode runs (ACME's and HUM's stages name that adapter), and the real
// runner has claude-code only.
const Agents = "AGT"

// The agent tickets: agentTasks tasks on the template pipeline, whose
// every agent stage does slow work (so that a kill finds a session
// mid-work with a checkpoint pushed), and one bug whose fix stage asks a
// blocking question that the harness answers. Six tasks whose steps sleep
// 2 s: with four and 1 s, a stage's sessions were all past their
// checkpoint-to-end window in one run of three (a kill not made).
const agentTasks = 6

// agentTask is the description of the i-th agent task: the scenario its
// every session plays (the first marker in a prompt counts), slow work on
// a file of its own, so that the branches Ballet merges do not conflict.
func agentTask(i int) string {
	return fakemodel.Marker("slow-work", "steps=2", "sleep=2", fmt.Sprintf("file=agent-%d.txt", i)) + "\nDo the work in two steps."
}

// maxAnswers bounds how often the harness answers the questions of an
// agent ticket (the scripted one, and the escalations a kill causes);
// after that an escalation stays.
const maxAnswers = 3

// agentAnswer is the harness's answer to every question of an agent
// ticket: the ask scenario reports done once its prompt holds it.
const agentAnswer = "blue"

// orphanGuard bounds the wait, after the harness killed the real runner,
// for the processes of its sessions to be gone (the kernel kills them with
// it): a hang guard, no speed claim. What is left after it is an orphan.
const orphanGuard = 30 * time.Second

// The scenario markers of the bug pipeline's agent stages (the bug's
// description holds none).
var (
	markAsk   = fakemodel.Marker("ask", "question=Which_colour?", "answer="+agentAnswer)
	markCheck = fakemodel.Marker("slow-work", "steps=2", "sleep=2", "file=agent-bug.txt")
)

// agentKillStages are the agent stages at which the harness kills the
// real runner and, separately, a session's agent CLI.
var agentKillStages = []string{"implement", "review", "verify"}

// agentKill is a kill the harness still has to make: of the runner, or of
// the agent CLI of a session, while a session of stage is mid-work.
type agentKill struct{ Kind, Stage string }

// agentKillPlan lists each stage's runner kill before its agent kill: the
// runner's kill wants a session of the stage mid-work with a checkpoint
// pushed, a window that closes fast once the stage's sessions end, while
// an agent CLI's kill finds a candidate again in the sessions that resume
// after the runner's restart.
func agentKillPlan() []agentKill {
	var plan []agentKill
	for _, st := range agentKillStages {
		plan = append(plan, agentKill{"runner", st}, agentKill{"agent", st})
	}
	return plan
}

// agentPipelines are AGT's pipelines: the template, except that a failed
// review or verify runs that stage again (the one a kill failed: its next
// session begins from the checkpoint; going back to implement would cost
// two more sessions), and a bug pipeline (a human triage, a fix that asks,
// a slow check, the merge).
func agentPipelines() map[string]any {
	def := pipeline.Template()
	for i, st := range def.Stages {
		if st.ID == "review" || st.ID == "verify" {
			def.Stages[i].Next.Failed = st.ID
		}
	}
	bug := map[string]any{
		"max_iterations": 3,
		"stages": []any{
			map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}},
			map[string]any{"id": "fix", "kind": "agent", "instructions": markAsk + "\nFix the bug.", "next": map[string]any{"done": "check", "failed": "$question"}},
			map[string]any{"id": "check", "kind": "agent", "instructions": markCheck + "\nCheck the fix.", "next": map[string]any{"done": "integrate", "failed": "fix"}},
			map[string]any{"id": "integrate", "kind": "platform", "action": "merge", "next": map[string]any{"failed": "fix"}},
		},
	}
	return map[string]any{"default": def, "bug": bug}
}

// onOpenCode makes every agent stage of def name the opencode adapter: the
// test runner's (see Agents).
func onOpenCode(def pipeline.Definition) pipeline.Definition {
	for i := range def.Stages {
		if def.Stages[i].Kind == pipeline.KindAgent {
			def.Stages[i].Adapter = pipeline.AdapterOpenCode
		}
	}
	return def
}

// agentSession is a session of the real runner, as its log tells.
type agentSession struct {
	Run, Ticket, Stage string
	Start              int // the runner's start that leased it
	Leased, Started    time.Time
	Ended              time.Time // zero: the CLI did not end while the runner lived
	Finished           bool      // Core took its finish (or gave it up)
	Checkpoints        int       // checkpoints pushed while it ran
	Restored           bool      // it began from the stage's checkpoint
	Killed             string    // "agent" or "runner": the harness killed it mid-work
}

// agentRunner is the real `ballet runner` (the suite's binary) with its own
// configuration: claude-code only, under bubblewrap, checkpoints every
// second, heartbeats every second (Core's grace is 3 s). It logs JSON; the
// harness follows its sessions from the log.
type agentRunner struct {
	bin, config, dir, logPath string
	env                       []string
	log                       *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	starts   int
	sessions map[string]*agentSession // by run id
	order    []*agentSession          // in lease order
	kills    []runnerKill
	outages  []outage
	twice    []string // runs leased more than once
	swept    []string // what a start's sweep found left by a dead runner
	noLines  int      // log lines that were not JSON
}

// startAgents starts the fake model and the real runner for project AGT.
func (s *suite) startAgents(claude, token string) error {
	fm := fakemodel.New()
	srv := httptest.NewServer(fm)
	s.t.Cleanup(func() { fm.Close(); srv.Close() }) // fm first: it releases hanging requests
	// The runner's folder is outside /tmp: sessions get a private /tmp,
	// and what the sandbox binds into theirs must exist outside it.
	dir, err := os.MkdirTemp("/var/tmp", "ballet-failuretest-agents-")
	if err != nil {
		return err
	}
	s.t.Cleanup(func() {
		if s.t.Failed() {
			s.t.Logf("failure suite (%s): the real runner's folder is kept in %s", s.o.Engine, dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	a := &agentRunner{bin: s.o.Binary, dir: dir, config: filepath.Join(dir, "runner.toml"), logPath: filepath.Join(s.dir, "agents-runner.log"),
		sessions: map[string]*agentSession{}}
	cfg := fmt.Sprintf(`[log]
format = "json"
[runner]
server = "http://%s"
name = "failuretest-agents"
workdir = %q
sessions = 4
sandbox = "bwrap"
checkpoint = "1s"
heartbeat = "1s"
drain = "2s"
watchdog = "1m"
pass_env = ["CLAUDE_CODE_MAX_RETRIES", "API_TIMEOUT_MS"]
[adapters.claude-code]
command = %q
model = "claude-sonnet-4-5"
[adapters.opencode]
command = %q
`, s.core.addr, filepath.Join(dir, "work"), claude, filepath.Join(dir, "no-opencode"))
	if err := os.WriteFile(a.config, []byte(cfg), 0o600); err != nil {
		return err
	}
	a.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8", "BALLET_RUNNER_TOKEN=" + token,
		"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-failuretest-fake-model", "CLAUDE_CODE_MAX_RETRIES=1", "API_TIMEOUT_MS=60000"}
	if a.log, err = os.Create(a.logPath); err != nil {
		return err
	}
	s.agents = a
	return a.start()
}

func (a *agentRunner) start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.starts++
	fmt.Fprintf(a.log, "=== runner start %d at %s ===\n", a.starts, time.Now().Format("15:04:05.000"))
	cmd := exec.Command(a.bin, "runner", "--config", a.config)
	cmd.Dir = a.dir
	cmd.Env = a.env
	if n := len(a.outages); n > 0 && a.outages[n-1].To.IsZero() {
		a.outages[n-1].To = time.Now()
	}
	start := a.starts
	cmd.Stdout = a.log
	cmd.Stderr = &lineWriter{fn: func(line string) {
		fmt.Fprintln(a.log, line)
		a.follow(start, line)
	}}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	a.cmd, a.exited = cmd, exited
	return nil
}

// follow reads one line of the runner's log ("15:04:05.000 {json}").
func (a *agentRunner) follow(start int, line string) {
	_, js, _ := strings.Cut(line, " ")
	var rec struct {
		Msg       string `json:"msg"`
		Run       string `json:"run"`
		Ticket    string `json:"ticket"`
		Stage     string `json:"stage"`
		Session   string `json:"session"`
		Processes int    `json:"processes"`
		Finish    string `json:"finish"` // how the session's finish ended: taken, gone, refused, timed_out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := json.Unmarshal([]byte(js), &rec); err != nil {
		a.noLines++
		return
	}
	now := time.Now()
	if rec.Msg == "killed what a session of a dead runner left running" {
		if rec.Processes > 0 { // it logs every session record it clears
			a.swept = append(a.swept, fmt.Sprintf("%s (%d processes)", rec.Session, rec.Processes))
		}
		return
	}
	if rec.Run == "" {
		return
	}
	ss := a.sessions[rec.Run]
	if rec.Msg == "session leased" {
		if ss != nil {
			a.twice = append(a.twice, rec.Run)
			return
		}
		ss = &agentSession{Run: rec.Run, Ticket: rec.Ticket, Stage: rec.Stage, Start: start, Leased: now}
		a.sessions[rec.Run] = ss
		a.order = append(a.order, ss)
		return
	}
	if ss == nil || ss.Start != start {
		return
	}
	switch {
	case rec.Msg == "session started":
		ss.Started = now
	case rec.Msg == "checkpoint pushed":
		ss.Checkpoints++
	case rec.Msg == "restored the stage's checkpoint":
		ss.Restored = true
	case rec.Msg == "session ended":
		ss.Ended = now
	case rec.Finish != "":
		// Every way the runner's finish ends carries the attribute (the
		// messages differ: matching them missed "this run's finish").
		ss.Finished = true
	}
}

func (a *agentRunner) dead() bool {
	a.mu.Lock()
	ch := a.exited
	a.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// busy reports whether the running runner has a session it has not
// finished.
func (a *agentRunner) busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ss := range a.order {
		if ss.Start == a.starts && !ss.Finished {
			return true
		}
	}
	return false
}

// unfinished lists the running runner's sessions whose finish the harness
// has not seen (what busy waits for), for a failure message.
func (a *agentRunner) unfinished() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, ss := range a.order {
		if ss.Start == a.starts && !ss.Finished {
			out = append(out, fmt.Sprintf("%s (%s, stage %s, leased %s, started %v, ended %v, killed %q)", ss.Run, ss.Ticket, ss.Stage,
				ss.Leased.Format("15:04:05.000"), !ss.Started.IsZero(), !ss.Ended.IsZero(), ss.Killed))
		}
	}
	return out
}

// maxKillsPerTicket bounds the harness's kills of one agent ticket.
const maxKillsPerTicket = 3

// candidate returns a session of stage of the running runner whose CLI
// runs and has pushed a checkpoint (it is mid-work), of the ticket killed
// least so far (and fewer than three times): the kills spread over the
// tickets. A third kill of one ticket is allowed because the last stage's
// sessions can all belong to tickets killed twice already (then the
// rerun of a killed stage is the only candidate left).
func (a *agentRunner) candidate(stage string, killed map[string]int) *agentSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	var best *agentSession
	for _, ss := range a.order {
		if ss.Start == a.starts && ss.Stage == stage && !ss.Started.IsZero() && ss.Ended.IsZero() && ss.Checkpoints > 0 &&
			ss.Killed == "" && killed[ss.Ticket] < maxKillsPerTicket && (best == nil || killed[ss.Ticket] < killed[best.Ticket]) {
			best = ss
		}
	}
	return best
}

// sandboxStart is how long after a session's start the harness does not
// kill its runner: a runner SIGKILLed while bubblewrap still sets its
// sandbox up can leave bubblewrap's idle init process (never the agent: the
// start handshake holds the agent back until the runner's go) to the
// runner's start-up sweep, which the suite's orphan check would count (seen
// once at load 20: a session started 197 ms before the kill). Documented in
// docs/runners.md; the failure suite kills runners mid-work, not mid-start.
const sandboxStart = 2 * time.Second

// sandboxStarting reports whether a session of the running runner is
// within sandboxStart of its start.
func (a *agentRunner) sandboxStarting(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ss := range a.order {
		if ss.Start == a.starts && ss.Ended.IsZero() && !ss.Started.IsZero() && now.Sub(ss.Started) < sandboxStart {
			return true
		}
	}
	return false
}

// killAgent kills, with SIGKILL, the process groups of the session's agent
// CLI (the processes that carry its BALLET_SESSION marker); false when
// none was found (it just ended).
func (a *agentRunner) killAgent(ss *agentSession) bool {
	groups := map[int]bool{}
	for _, p := range proc.Find(ss.Run) {
		groups[p.PGID] = true
	}
	for g := range groups {
		_ = procgroup.Signal(g, syscall.SIGKILL)
	}
	if len(groups) == 0 {
		return false
	}
	a.mu.Lock()
	ss.Killed = "agent"
	a.mu.Unlock()
	return true
}

// kill kills the runner with SIGKILL and records the runs it had in
// flight (leased, not finished).
func (a *agentRunner) kill() error {
	a.mu.Lock()
	cmd, ch := a.cmd, a.exited
	if cmd != nil {
		k := runnerKill{At: time.Now()}
		for _, ss := range a.order {
			if ss.Start == a.starts && !ss.Finished {
				k.Runs = append(k.Runs, ss.Run)
				if ss.Killed == "" && !ss.Started.IsZero() && ss.Ended.IsZero() {
					ss.Killed = "runner"
				}
			}
		}
		sort.Strings(k.Runs)
		a.kills = append(a.kills, k)
		a.outages = append(a.outages, outage{What: "agent runner", From: k.At})
	}
	a.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-ch:
		return nil
	case <-time.After(hangGuard):
		return fmt.Errorf("the agent runner (pid %d) did not exit after SIGKILL within %s (hang guard)", cmd.Process.Pid, hangGuard)
	}
}

// stop stops the runner with SIGTERM (it drains) and waits for it.
func (a *agentRunner) stop() error {
	a.mu.Lock()
	cmd, ch := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch:
	case <-time.After(hangGuard):
		_ = cmd.Process.Kill()
		return fmt.Errorf("the agent runner (pid %d) did not stop after SIGTERM within %s (hang guard)", cmd.Process.Pid, hangGuard)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return nil // killed by the harness before
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("the agent runner exited with status %d after SIGTERM (want 0: a drain)", code)
	}
	return nil
}

// leftovers lists the processes still alive of the runs in flight at the
// last kill.
func (a *agentRunner) leftovers() []string {
	a.mu.Lock()
	var runs []string
	if n := len(a.kills); n > 0 {
		runs = a.kills[n-1].Runs
	}
	a.mu.Unlock()
	var left []string
	for _, run := range runs {
		for _, p := range proc.Find(run) {
			left = append(left, fmt.Sprintf("run %s: pid %d (group %d)", run, p.PID, p.PGID))
		}
	}
	return left
}

// lastKill is when the runner was last killed.
func (a *agentRunner) lastKill() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.kills); n > 0 {
		return a.kills[n-1].At
	}
	return time.Time{}
}

// snapshot copies what the log told: the sessions in lease order, the
// kills, the outages, the runs leased twice and what sweeps found.
func (a *agentRunner) snapshot() (sessions []agentSession, kills []runnerKill, outages []outage, twice, swept []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ss := range a.order {
		sessions = append(sessions, *ss)
	}
	return sessions, slices.Clone(a.kills), slices.Clone(a.outages), slices.Clone(a.twice), slices.Clone(a.swept)
}

// driveAgents restarts the real runner after a kill (once the processes
// of its sessions are gone) and makes the next kill of the plan when a
// session of its stage is mid-work.
func (s *suite) driveAgents(now time.Time) {
	a := s.agents
	if a.dead() {
		if s.agentRestart.IsZero() {
			s.t.Fatalf("the agent runner exited by itself:\n%s", tailFile(a.logPath, 4000))
		}
		if now.Before(s.agentRestart) {
			return
		}
		if left := a.leftovers(); len(left) > 0 {
			if now.Sub(a.lastKill()) < orphanGuard {
				return // the kernel is still killing them
			}
			s.orphans = append(s.orphans, left...)
			s.logf("ORPHANS: %s after the agent runner was killed %s ago", strings.Join(left, ", "), orphanGuard)
		}
		s.logf("agent runner: restart")
		if err := a.start(); err != nil {
			s.t.Fatal(err)
		}
		s.agentRestart = time.Time{}
		return
	}
	if now.Sub(s.agentKilledAt) < 2*time.Second { // spread the kills
		return
	}
	for i, k := range s.agentPlan {
		ss := a.candidate(k.Stage, s.agentKillsOf)
		if ss == nil {
			continue
		}
		switch k.Kind {
		case "agent":
			if !a.killAgent(ss) {
				continue
			}
			s.sum.AgentKills++
			s.logf("agent: SIGKILL the agent CLI of %s %s (run %s, %d checkpoints pushed)", ss.Ticket, ss.Stage, ss.Run, ss.Checkpoints)
		case "runner":
			if a.sandboxStarting(now) {
				continue
			}
			if err := a.kill(); err != nil {
				s.t.Fatal(err)
			}
			s.sum.AgentRunnerKills++
			s.agentRestart = now.Add(time.Duration(300+s.rng.IntN(1200)) * time.Millisecond)
			s.logf("agent runner: SIGKILL while %s %s is mid-work (run %s); in flight: %v", ss.Ticket, ss.Stage, ss.Run, a.kills[len(a.kills)-1].Runs)
		}
		s.agentKillsOf[ss.Ticket]++
		s.agentKilledAt = now
		s.agentPlan = slices.Delete(s.agentPlan, i, i+1)
		return
	}
}

// answerAgentQuestions answers the open questions of an agent ticket
// whose flow waits for an answer (at most maxAnswers times per ticket).
func (s *suite) answerAgentQuestions(key string, f flowView) {
	if s.answered[key] >= maxAnswers || s.answeredAt[key] == f.Version {
		return
	}
	alive := func() bool { return !s.core.dead() }
	status, b, err := s.api.call(alive, 10*time.Second, AdminToken, "GET", "/api/v1/items/"+key+"/questions", nil)
	if err != nil || status != 200 {
		return // Core is down: next round
	}
	var list struct {
		Questions []struct {
			ID     string  `json:"id"`
			Text   string  `json:"text"`
			Answer *string `json:"answer"`
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		s.t.Fatalf("questions of %s: %v: %s", key, err, b)
	}
	for _, q := range list.Questions {
		if q.Answer != nil {
			continue
		}
		status, b, err := s.api.call(alive, 10*time.Second, AdminToken, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": agentAnswer})
		if err != nil {
			return
		}
		s.logf("answer %s's question %q: %d", key, q.Text, status)
		if status != 200 && status != 409 {
			s.t.Errorf("answer %s's question %s: %d %s", key, q.ID, status, b)
		}
	}
	s.answered[key]++
	s.answeredAt[key] = f.Version
	s.sum.Answers++
}
