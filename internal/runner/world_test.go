package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runner"
	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/runner/sandbox"
	"github.com/ballet/ballet/internal/runner/sandbox/sandboxtest"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/testkit/agenttest"
)

// hangGuard bounds every wait on a real process or server: a hang becomes
// a failure. It is no speed limit.
const hangGuard = 3 * time.Minute

// The model the sessions ask for and its list prices per million tokens:
// claude-code prices claude-sonnet-4-5 itself, opencode is given these.
const (
	model                                              = "claude-sonnet-4-5"
	priceIn, priceOut, priceCacheRead, priceCacheWrite = 3.0, 15.0, 0.3, 3.75
)

func listCost(u fakemodel.Usage) float64 {
	return (float64(u.Input)*priceIn + float64(u.Output)*priceOut +
		float64(u.CacheRead)*priceCacheRead + float64(u.CacheWrite)*priceCacheWrite) / 1e6
}

func sameCost(a, b float64) bool { return math.Abs(a-b) <= 1e-9+1e-9*math.Abs(b) }

// testTiming makes the runner's loops quick enough for tests on the real
// clock (the loops themselves are tested on the fake clock).
var testTiming = runner.Timing{
	Heartbeat: 200 * time.Millisecond, RunHeartbeat: 200 * time.Millisecond, LeaseWait: time.Second,
	KillGrace: 3 * time.Second, FinalGrace: 10 * time.Second, RetryFirst: 50 * time.Millisecond,
	RetryCap: 500 * time.Millisecond, LogFlush: 30 * time.Second, FinishFor: time.Minute,
}

// world is one test's machine: a fake Core, the fake model, a git remote
// and the runner's folder.
type world struct {
	t      testing.TB
	core   *fakeCore
	fm     *fakemodel.Server
	fmURL  string
	dump   string // the fake model's requests, one file each
	remote *remote
	root   string // outside /tmp: what the sandbox must hide has to exist without it
	logs   *syncBuffer
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{t: t, core: newFakeCore(t), fm: fakemodel.New(), dump: t.TempDir(), logs: &syncBuffer{}}
	w.fm.Dump = w.dump
	srv := httptest.NewServer(w.fm)
	t.Cleanup(func() { w.fm.Close(); srv.Close() }) // fm first: it releases hanging requests
	w.fmURL = srv.URL
	w.remote = newRemote(t)
	w.root = outsideTmp(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner log:\n%s", tail(w.logs.String(), 20000))
		}
	})
	return w
}

// options are a runner's options in this world: bwrap, the CLIs against
// the fake model, quick timing. The CLIs named (claude-code when none is)
// are needed: a missing one ends the test (package parts: a failure under
// CI=true, a counted skip elsewhere); the other is configured when it is
// there, so that a test of claude-code never needs opencode.
func (w *world) options(clis ...string) runner.Options {
	w.t.Helper()
	needBwrap(w.t)
	if len(clis) == 0 {
		clis = []string{runproto.ClaudeCode}
	}
	path := func(cli string, c agenttest.CLI) string {
		if slices.Contains(clis, cli) {
			return c.Path(w.t)
		}
		if p := c.Present(); p != "" {
			return p
		}
		return filepath.Join(w.root, "no-"+c.Bin) // not offered
	}
	cfg := config.Default()
	cfg.Runner.Server = w.core.URL
	cfg.Runner.Workdir = filepath.Join(w.root, "runner")
	cfg.Runner.PassEnv = []string{"CLAUDE_CODE_MAX_RETRIES"}
	cfg.Runner.Watchdog = config.Duration{Duration: 2 * time.Minute}
	cfg.Adapters.ClaudeCode.Command = path(runproto.ClaudeCode, agenttest.ClaudeCLI)
	cfg.Adapters.OpenCode = config.OpenCode{Command: path(runproto.OpenCode, agenttest.OpenCodeCLI), Model: model, Provider: "openai", BaseURL: w.fmURL + "/v1",
		Prices: config.Prices{Input: priceIn, Output: priceOut, CacheRead: priceCacheRead, CacheWrite: priceCacheWrite}}
	return runner.Options{
		Config: cfg.Runner, Adapters: cfg.Adapters, Token: w.core.runnerToken, Version: "test",
		Environ: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
			"ANTHROPIC_BASE_URL=" + w.fmURL, "ANTHROPIC_API_KEY=" + modelKey, "OPENAI_API_KEY=" + modelKey,
			"CLAUDE_CODE_MAX_RETRIES=1", "RUNNER_SECRET=" + runnerSecret, "CLAUDECODE=inherited", "CLAUDE_CODE_ENTRYPOINT=inherited"},
		Log:    slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Timing: testTiming,
	}
}

// Secrets that must never leave the runner.
const (
	modelKey     = "sk-fake-model-key-31337"
	runnerSecret = "runner-secret-not-for-sessions"
)

// running is a runner run in this process.
type running struct {
	r      *runner.Runner
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs a runner with o until the test ends.
func (w *world) start(o runner.Options) *running {
	w.t.Helper()
	r, err := runner.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &running{r: r, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(rr.done); rr.err = r.Run(ctx) }()
	w.t.Cleanup(func() {
		r.StopNow()
		cancel()
		<-rr.done
	})
	return rr
}

// stop drains the runner (as SIGTERM does) and returns Run's error.
func (rr *running) stop(t *testing.T) error {
	t.Helper()
	rr.cancel()
	select {
	case <-rr.done:
	case <-time.After(hangGuard):
		t.Fatal("the runner did not stop")
	}
	return rr.err
}

// session is a session of ticket ACME-1's stage implement on the world's
// remote, whose description carries marker.
func (w *world) session(marker string) runproto.Session {
	return runproto.Session{
		Ticket: runproto.SessionTicket{Key: "ACME-1", Type: "task", Title: "Add a health endpoint",
			Description: "Add GET /health.\n" + marker, AcceptanceCriteria: "GET /health answers 200"},
		Stage: runproto.SessionStage{ID: "implement", Name: "Implement", Instructions: "Implement the ticket.", Adapter: runproto.ClaudeCode,
			Model: model, TimeoutSeconds: 600, Iteration: 1, MaxIterations: 3},
		Skills:            []runproto.SessionSkill{},
		AnsweredQuestions: []runproto.SessionAnswer{},
		Repository:        &runproto.SessionRepo{Forge: "git", URL: w.remote.url, DefaultBranch: "main", Branch: "ballet/ACME-1"},
	}
}

// served returns the fake model's sessions, in order of first request.
func (w *world) served() []fakemodel.Session { return w.fm.Sessions() }

// servedFirst returns the fake model's first session; the test fails when
// there is none.
func (w *world) servedFirst() fakemodel.Session {
	w.t.Helper()
	ss := w.served()
	if len(ss) == 0 {
		w.t.Fatal("the fake model served no session")
	}
	return ss[0]
}

// prompts returns the text of every model request the fake model dumped.
func (w *world) prompts() string {
	w.t.Helper()
	files, _ := filepath.Glob(filepath.Join(w.dump, "*.json"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			w.t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// wantUsage checks that the usage a run finished with is exactly what the
// fake model served the session, and its cost the list prices of it.
func wantUsage(t *testing.T, got *runproto.Usage, served fakemodel.Session) {
	t.Helper()
	if got == nil {
		t.Fatal("the finish carries no usage")
	}
	u := fakemodel.Usage{Input: got.InputTokens, Output: got.OutputTokens, CacheRead: got.CacheReadTokens, CacheWrite: got.CacheWriteTokens}
	if u != served.Usage || served.Usage.Input == 0 || served.Usage.Output == 0 {
		t.Errorf("finish usage %+v, the model served %+v", u, served.Usage)
	}
	if want := listCost(served.Usage); !sameCost(got.CostUSD, want) {
		t.Errorf("finish cost $%.9f, the list prices make $%.9f", got.CostUSD, want)
	}
}

// sessionProcs lists the live processes of run's session (its marker in
// their environment), wherever they went, as "pid (command)".
func sessionProcs(run string) []string {
	want := []byte(proc.Marker(run) + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 || len(stat) < i+3 || stat[i+2] == 'Z' {
			continue
		}
		if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && bytes.Contains(env, want) {
			out = append(out, e.Name()+" "+string(stat[bytes.IndexByte(stat, '('):i+1]))
		}
	}
	return out
}

// waitFor polls cond (a process table, a file) until it holds, failing
// after hangGuard. Polling is for state no one announces; it is no
// synchronisation with the runner.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", hangGuard, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remote is a bare git repository with a main branch.
type remote struct {
	t    testing.TB
	url  string
	work string
}

func newRemote(t testing.TB) *remote {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required: %v", err)
	}
	dir := t.TempDir()
	r := &remote{t: t, url: filepath.Join(dir, "repo.git"), work: filepath.Join(dir, "person")}
	git(t, dir, "init", "--quiet", "--bare", r.url)
	git(t, dir, "init", "--quiet", "-b", "main", r.work)
	git(t, r.work, "config", "user.name", "Person")
	git(t, r.work, "config", "user.email", "person@example.com")
	writeFile(t, filepath.Join(r.work, "README"), "hello\n")
	git(t, r.work, "add", "-A")
	git(t, r.work, "commit", "--quiet", "-m", "first commit")
	git(t, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/main")
	return r
}

// ref is the commit of ref on the remote, "" when it does not exist.
func (r *remote) ref(ref string) string {
	r.t.Helper()
	out := git(r.t, r.work, "ls-remote", r.url, ref)
	sha, _, _ := strings.Cut(out, "\t")
	return sha
}

// show is a file of a commit on the remote ("" when it has none).
func (r *remote) show(commit, path string) string {
	r.t.Helper()
	out, err := exec.Command("git", "--git-dir="+r.url, "show", commit+":"+path).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// files lists the files of a commit on the remote.
func (r *remote) files(commit string) []string {
	r.t.Helper()
	return strings.Fields(git(r.t, r.work, "--git-dir="+r.url, "ls-tree", "-r", "--name-only", commit))
}

// author is a commit's author and committer names.
func (r *remote) author(commit string) string {
	r.t.Helper()
	return git(r.t, r.work, "--git-dir="+r.url, "log", "-1", "--format=%an <%ae> / %cn", commit)
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// needBwrap fails the test without a working bubblewrap, unless
// BALLET_SKIP_SANDBOX=1 asks to skip it: the runner's sessions run in the
// real sandbox.
func needBwrap(t testing.TB) {
	t.Helper()
	sandboxtest.Need(t, sandbox.Sandbox{}.Check)
}

// outsideTmp makes a folder outside /tmp (which every sandbox hides
// anyway).
func outsideTmp(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "ballet-runner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
}

var (
	_ = io.Discard
	_ = slices.Contains[[]string]
)
