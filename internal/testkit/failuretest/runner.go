package failuretest

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// Environment of the runner process.
const (
	// RunnerEnv selects runner mode: a test binary's TestMain calls
	// RunnerMain when it is set.
	RunnerEnv  = "BALLET_FAILURETEST_RUNNER"
	envCore    = "BALLET_FAILURETEST_CORE"    // Core's base URL
	envToken   = "BALLET_FAILURETEST_TOKEN"   // the runner token
	envBare    = "BALLET_FAILURETEST_BARE"    // the bare repository
	envWork    = "BALLET_FAILURETEST_WORK"    // a folder for the runner's clones
	envWorkers = "BALLET_FAILURETEST_WORKERS" // sessions worked at once
	envGitea   = "BALLET_FAILURETEST_GITEA"   // project GTA's repository on Gitea (clone URL with a token), or unset
)

// PushStages are the agent stages before a merge: the runner pushes the
// ticket's branch before it reports such a stage done.
var PushStages = map[string]bool{"verify": true, "check": true}

// Outcome is what the test runner reports for a run, decided from the
// ticket's number, the stage and the iteration alone:
//
//   - implement and fix are blocked (→ $question: a deliberate escalation)
//     in iteration 1 for ticket numbers divisible by 17 (Escalates);
//   - review fails in iteration 1 for numbers divisible by 3 (→ implement,
//     iteration 2);
//   - check fails in iteration 1 for numbers ≡ 1 mod 4 (→ fix, iteration 2);
//   - everything else is done.
func Outcome(number int64, stage string, iteration int) string {
	switch {
	case (stage == "implement" || stage == "fix") && iteration == 1 && Escalates(number):
		return "blocked"
	case stage == "review" && iteration == 1 && number%3 == 0:
		return "failed"
	case stage == "check" && iteration == 1 && number%4 == 1:
		return "failed"
	}
	return "done"
}

// Escalates reports whether the runner deliberately escalates the ticket
// (Outcome blocked in its first stage). Such tickets block nothing.
func Escalates(number int64) bool { return number%17 == 0 }

// RunnerMain is the runner process: it registers with the runner token and
// then works runs until it is killed — lease, a little work, a heartbeat,
// the push of the branch before a merge, report, finish — retrying every
// call while Core is down. It prints one line per action.
func RunnerMain() int {
	r := &testRunner{base: os.Getenv(envCore), token: os.Getenv(envToken), bare: os.Getenv(envBare),
		hc: &http.Client{Timeout: 15 * time.Second}}
	workers, _ := strconv.Atoi(os.Getenv(envWorkers))
	workers = max(workers, 1)
	r.clone = filepath.Join(os.Getenv(envWork), fmt.Sprintf("clone-%d", os.Getpid()))
	if _, err := gitOut(filepath.Dir(r.clone), "clone", "-q", r.bare, r.clone); err != nil {
		r.say("fatal clone: %v", err)
		return 1
	}
	if g := os.Getenv(envGitea); g != "" {
		r.giteaClone = r.clone + "-gitea"
		if _, err := gitOut(filepath.Dir(r.clone), "clone", "-q", g, r.giteaClone); err != nil {
			r.say("fatal clone of the Gitea repository: %v", err)
			return 1
		}
	}
	r.p = apitest.Protocol{C: r, Token: r.token}
	status, b := r.p.Register(fmt.Sprintf("failuretest-%d", os.Getpid()))
	if status != 201 || r.p.ID == "" {
		r.say("fatal register: %d %s", status, b)
		return 1
	}
	r.say("registered %s", r.p.ID)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(r.work)
	}
	wg.Wait()
	return 0
}

type testRunner struct {
	base, token, bare, clone string
	p                        apitest.Protocol // the runner protocol, over Call
	giteaClone               string           // project GTA's branches go there
	hc                       *http.Client
	out                      sync.Mutex
	git                      sync.Mutex
}

func (r *testRunner) say(format string, args ...any) {
	r.out.Lock()
	defer r.out.Unlock()
	fmt.Printf(format+"\n", args...)
}

// Call retries transport errors and 5xx answers forever, with backoff: the
// harness restarts Core. It is the Caller of r.p.
func (r *testRunner) Call(token, method, path string, body any) (int, []byte) {
	c := &client{base: r.base, hc: r.hc}
	wait := 20 * time.Millisecond
	for {
		status, b, err := c.once(token, method, path, body)
		if err == nil && status < 500 {
			return status, b
		}
		time.Sleep(wait)
		wait = min(wait*2, time.Second)
	}
}

// onceCaller makes each call once: a transport error is status 0.
type onceCaller struct{ c *client }

// Call implements apitest.Caller.
func (o onceCaller) Call(token, method, path string, body any) (int, []byte) {
	status, b, _ := o.c.once(token, method, path, body)
	return status, b
}

func (r *testRunner) work() {
	for {
		// Only opencode runs: ACME's and HUM's stages name that adapter,
		// AGT's are the real runner's (see Agents).
		l, ok, status, b := r.p.Lease(2, "opencode")
		if status == 204 {
			continue
		}
		if !ok {
			r.say("lease-error %d %s", status, b)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		r.handle(l)
	}
}

func (r *testRunner) handle(run apitest.LeasedRun) {
	_, num, _ := strings.Cut(run.Item, "-")
	n, _ := strconv.ParseInt(num, 10, 64)
	r.say("lease %s %s it=%d step=%d run=%s", run.Item, run.Stage, run.Iteration, run.Step, run.ID)
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s/%d", run.Item, run.Stage, run.Iteration)
	time.Sleep(time.Duration(30+h.Sum32()%120) * time.Millisecond) // the session works
	cancelled, ok, status, b := r.p.Heartbeat(run.ID)
	if !ok {
		r.say("gone %s %s run=%s heartbeat %d %s", run.Item, run.Stage, run.ID, status, b)
		return
	}
	// The push may wait for the others' (and git is slow on a busy
	// machine): the run heartbeats every second until the end, well within
	// Core's grace.
	ended := make(chan struct{})
	defer close(ended)
	once := apitest.Protocol{C: onceCaller{&client{base: r.base, hc: r.hc}}, Token: r.token, ID: r.p.ID}
	go func() {
		for {
			select {
			case <-ended:
				return
			case <-time.After(time.Second):
				once.Heartbeat(run.ID)
			}
		}
	}()
	if cancelled {
		r.p.Finish(run.ID, 143, nil)
		r.say("cancelled %s %s run=%s", run.Item, run.Stage, run.ID)
		return
	}
	outcome := Outcome(n, run.Stage, run.Iteration)
	summary := fmt.Sprintf("%s %s iteration %d: %s", run.Item, run.Stage, run.Iteration, outcome)
	if outcome == "done" && PushStages[run.Stage] {
		if err := r.push(run.Item, run.Step); err != nil {
			outcome, summary = "failed", "could not push: "+err.Error()
		} else {
			r.say("push %s ballet/%s", run.Item, run.Item)
		}
	}
	status, b = r.p.Report(run, outcome, summary)
	if status != 200 {
		r.say("gone %s %s run=%s report %d %s", run.Item, run.Stage, run.ID, status, b)
		return
	}
	status, b = r.p.Finish(run.ID, 0, &runproto.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.001})
	if status != 200 {
		r.say("gone %s %s run=%s finish %d %s", run.Item, run.Stage, run.ID, status, b)
		return
	}
	r.say("done %s %s it=%d step=%d run=%s outcome=%s", run.Item, run.Stage, run.Iteration, run.Step, run.ID, outcome)
}

// push commits on the ticket's branch (made from main) and force-pushes it,
// as an agent does.
func (r *testRunner) push(key string, step int) error {
	r.git.Lock()
	defer r.git.Unlock()
	clone := r.clone
	if projectOf(key) == OnGitea {
		clone = r.giteaClone
	}
	branch := "ballet/" + key
	file := "ballet_" + key + ".txt"
	steps := [][]string{
		{"fetch", "-q", "origin", "main"},
		{"checkout", "-q", "-B", branch, "origin/main"},
	}
	for _, a := range steps {
		if _, err := gitOut(clone, a...); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(clone, file), fmt.Appendf(nil, "%s step %d\n", key, step), 0o644); err != nil {
		return err
	}
	for _, a := range [][]string{{"add", file}, {"commit", "-q", "-m", "work on " + key}, {"push", "-q", "-f", "origin", branch}} {
		if _, err := gitOut(clone, a...); err != nil {
			return err
		}
	}
	return nil
}
