//go:build linux

package uitest

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runner"
	"github.com/ballet/ballet/internal/runner/sandbox"
	"github.com/ballet/ballet/internal/runner/sandbox/sandboxtest"
	"github.com/ballet/ballet/internal/testkit/agenttest"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// agentModel is the model the real runner's claude-code asks the fake
// model for (the pipeline's stages name none).
const agentModel = "claude-sonnet-4-5"

// startAgentRunner runs, until the test ends, Ballet's real runner
// (internal/runner, as `ballet runner` and `ballet up` run it) for w's
// Core with a runner token of its own: the real claude-code CLI
// (BALLET_CLAUDE) under bubblewrap, talking to Ballet's fake model
// (internal/fakemodel, as `ballet dev fake-model` serves it) on
// 127.0.0.1. A missing CLI or sandbox fails the test under CI=true and is
// a counted skip elsewhere (package parts). It returns the fake model.
func startAgentRunner(t *testing.T, w *World) *fakemodel.Server {
	t.Helper()
	claude := agenttest.Claude(t)
	sandboxtest.Need(t, sandbox.Sandbox{}.Check)

	fm := fakemodel.New()
	srv := httptest.NewServer(fm)
	t.Cleanup(func() { fm.Close(); srv.Close() }) // fm first: it releases hanging requests

	// The runner's folder is outside /tmp: sessions get a private /tmp,
	// and what the sandbox binds into theirs must exist outside it.
	root, err := os.MkdirTemp("/var/tmp", "ballet-uitest-runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	var tok struct{ Token string }
	w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "local", "kind": "runner"}).JSON(t, &tok)

	cfg := config.Default()
	cfg.Runner.Server = w.URL
	cfg.Runner.Name = "local"
	cfg.Runner.Workdir = filepath.Join(root, "work")
	cfg.Runner.PassEnv = []string{"CLAUDE_CODE_MAX_RETRIES"}
	cfg.Adapters.ClaudeCode.Command = claude
	cfg.Adapters.ClaudeCode.Model = agentModel
	cfg.Adapters.OpenCode.Command = filepath.Join(root, "no-opencode") // not offered
	logs := &lockedBuffer{}
	r, err := runner.New(runner.Options{
		Config: cfg.Runner, Adapters: cfg.Adapters, Token: tok.Token, Version: "uitest",
		Environ: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
			"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-uitest-fake-model", "CLAUDE_CODE_MAX_RETRIES=1"},
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		// Quick enough for a test on the real clock: a lease's long poll
		// and the heartbeats are the protocol's knobs, not the session's.
		Timing: runner.Timing{Heartbeat: 500 * time.Millisecond, RunHeartbeat: 500 * time.Millisecond, LeaseWait: time.Second,
			RetryFirst: 50 * time.Millisecond, RetryCap: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("the runner cannot start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		r.StopNow()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the runner stopped: %v", err)
			}
		case <-time.After(apitest.HangGuard):
			t.Errorf("the runner did not stop within %v", apitest.HangGuard)
		}
		if t.Failed() {
			t.Logf("runner log:\n%s", logs.tail(20000))
		}
	})
	return fm
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	return s[max(0, len(s)-n):]
}

// TestApproveTheAgentsWork: the whole path, not a replay. A ticket made
// ready is started by Core's scheduler, leased by the real runner, worked
// by the real claude-code against the fake model (which writes
// hello-ACME-1.txt and reports done) and pushed to the plain-git
// repository; at the human stage the ticket page shows the branch, the
// agent's commit under its stage with a link to its run, the diff of the
// file it wrote, the session as a transcript (its words, its Write tool
// call, its report) and an approve form that names the head. A commit
// pushed to the branch from outside then makes the approval of the head
// the page showed fail with Core's 409 message, in words, on the page;
// after a reload the page shows the new head (the outside commit in a
// group of its own), and approving it ends the flow.
func TestApproveTheAgentsWork(t *testing.T) {
	w := NewWorld(t)
	fm := startAgentRunner(t, w)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Write the greeting", "state": "ready"})
	w.AwaitFlow("ACME-1", "the agent's work to reach the approval", func(f Flow) bool {
		if f.Status == "failed" || f.Waiting == "answer" {
			t.Fatalf("the flow ended at %+v", f)
		}
		return f.Waiting == "approval"
	})
	if n := len(fm.Sessions()); n != 1 {
		t.Fatalf("the fake model served %d sessions, want 1", n)
	}
	var runs struct {
		Runs []struct{ ID, Stage, Status, Model string }
	}
	w.Admin(200, "GET", "/api/v1/items/ACME-1/runs", nil).JSON(t, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].Stage != "implement" || runs.Runs[0].Status != "succeeded" {
		t.Fatalf("runs %+v, want one succeeded implement run", runs.Runs)
	}
	run := runs.Runs[0].ID
	head := w.Repo.Head("ballet/ACME-1")
	title := gitOut(t, w.Repo.Bare, "log", "-1", "--format=%s", head)
	if !strings.HasPrefix(title, "ACME-1") {
		t.Fatalf("the agent's commit is titled %q", title)
	}

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/items/ACME-1")
	p.WaitText(`[data-testid="changes-branch"]`, "ballet/ACME-1")
	p.WaitText(`[data-testid="changes-branch"]`, "merge into main")
	p.WaitText(`[data-testid="changes-head"]`, head[:7])
	p.WaitText(`[data-testid="commit-group"][data-stage="implement"] [data-testid="commit"]`, title)
	if n := p.Count(`[data-testid="commit-group"]`); n != 1 {
		t.Errorf("%d commit groups, want the implement stage's alone", n)
	}
	if n := p.Count(`[data-testid="commit-group"][data-stage="implement"] a[href="#run-` + run + `"]`); n != 1 {
		t.Errorf("the agent's commit links its run %s %d times, want once", run, n)
	}
	p.WaitText(`[data-testid="files"]`, "hello-ACME-1.txt")
	p.WaitText(`[data-testid="file-diff"][data-path="hello-ACME-1.txt"] table.diff tr.add`, "hello from the fake model for ACME-1")
	if !p.HasButton("#flow", "Approve "+head[:7]) {
		t.Errorf("the approval does not name the head %s: %q", head[:7], p.Text(`[data-testid="approve-form"]`))
	}
	if got := Eval[string](p, `[...document.querySelectorAll("#flow button")].find(b => b.textContent.startsWith("Approve"))?.title ?? ""`); got != "Approve the head "+head {
		t.Errorf("the approve button's title is %q, want the whole head %s", got, head)
	}
	p.Check("agent-changes")

	// The session, from the log the runner uploaded, as a conversation.
	p.Click(`[data-testid="commit"] a[href="#run-` + run + `"]`)
	p.WaitText(`[data-testid="transcript"] [data-kind="text"]`, "I will write the file.")
	p.WaitText(`[data-testid="transcript"] [data-kind="tool_call"] summary`, "Write")
	if n := p.Count(`[data-testid="transcript"] [data-kind="tool_call"] details:not([open])`); n < 1 {
		t.Errorf("no collapsed tool call in the transcript")
	}
	p.WaitText(`[data-testid="transcript"] [data-kind="report"]`, "Wrote the file.")
	p.WaitText(`[data-testid="run-model"]`, agentModel)
	p.Check("agent-transcript")

	// Someone pushes to the branch from outside: the head the page shows
	// is no longer the branch's.
	moved := w.Repo.CommitFiles("ballet/ACME-1", map[string]string{"NOTES.md": "pushed by hand\n"}, "Notes pushed by hand")
	p.AllowConsole(`status of 409`)
	p.ClickButton("#flow", "Approve "+head[:7])
	want := "the approval names the head " + head[:12] + ", but the branch ballet/ACME-1 has moved to " + moved[:12] +
		" since: read the changes again before deciding"
	p.WaitText(`#flow [role="alert"]`, want)
	if f := w.AwaitFlow("ACME-1", "still waiting", func(Flow) bool { return true }); f.Waiting != "approval" {
		t.Fatalf("after the refused approval the flow is %+v", f)
	}
	p.Check("agent-approval-refused")

	p.Open("/items/ACME-1")
	p.WaitText(`[data-testid="changes-head"]`, moved[:7])
	p.WaitText(`[data-testid="commit-group"][data-stage=""]`, "Notes pushed by hand")
	p.WaitText(`[data-testid="commit-group"][data-stage="implement"]`, title)
	p.WaitText(`[data-testid="file-diff"][data-path="NOTES.md"]`, "pushed by hand")
	if p.HasButton("#flow", "Approve "+head[:7]) {
		t.Errorf("after the reload the page still offers to approve %s", head[:7])
	}
	p.ClickButton("#flow", "Approve "+moved[:7])
	w.AwaitFlow("ACME-1", "the flow to go on", func(f Flow) bool { return f.Status == "done" })
	p.WaitText(`[data-testid="flow-status"]`, "done")
	p.Check("agent-approved")
}

// gitOut runs git in dir and returns its output, trimmed.
func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
