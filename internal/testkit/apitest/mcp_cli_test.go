package apitest_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/fakemodel"
	knowledge "github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/knowledge/client/clientfake"
	"github.com/ballet/ballet/internal/runner/agent"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/agenttest"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestClaudeCodeTalksToCoresMCP runs the real claude-code CLI, configured
// by the runner's adapter, against a real Core's /api/v1/mcp with a run
// token (the model is the scripted fake): the session reads the ticket
// with get_ticket and submits it as its report, which lands on the run.
func TestClaudeCodeTalksToCoresMCP(t *testing.T) {
	t.Parallel()
	claude := agenttest.Claude(t)
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser", "acceptance_criteria": "parses the grammar"})
		runner := e.NewRunner("r1")
		queueRun(e, "ACME-1")
		l := runner.MustLease()

		out := runClaude(t, e, claude, l, fakemodel.Marker("read-ticket"))
		var got struct{ Outcome, Report string }
		e.Admin(200, "GET", "/api/v1/runs/"+l.ID, nil).JSON(t, &got)
		if got.Outcome != "done" || !strings.Contains(got.Report, `"key":"ACME-1"`) || !strings.Contains(got.Report, "parses the grammar") {
			t.Fatalf("the run after the session: %+v\nclaude's output:\n%s", got, out)
		}
	})
}

// TestClaudeCodeSearchesKnowledge: a real claude-code session (the
// scripted model) searches its organization's knowledge through Core's
// MCP endpoint and reports what it found.
func TestClaudeCodeSearchesKnowledge(t *testing.T) {
	t.Parallel()
	claude := agenttest.Claude(t)
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fake := clientfake.Start(t, apitest.ServiceToken)
		fake.Put("acme", knowledge.Entry{Slug: "conventions/go", Title: "Go conventions", Body: "Wrap every error with context."})
		e := apitest.New(t, s, func(c *config.Config) { c.Knowledge.URL = fake.URL })
		e.Org("acme")
		e.Project("acme", "ACME")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Parser"})
		runner := e.NewRunner("r1")
		queueRun(e, "ACME-1")
		l := runner.MustLease()

		out := runClaude(t, e, claude, l, fakemodel.Marker("search-knowledge", "query=every_error"))
		var got struct{ Outcome, Report string }
		e.Admin(200, "GET", "/api/v1/runs/"+l.ID, nil).JSON(t, &got)
		if got.Outcome != "done" || !strings.Contains(got.Report, `"slug":"conventions/go"`) {
			t.Fatalf("the run after the session: %+v\nclaude's output:\n%s", got, out)
		}
	})
}

// runClaude runs the real claude-code CLI, configured by the runner's
// adapter, for leased run l of ticket ACME-1 against Core's MCP endpoint,
// the scripted model picking its scenario from description; it returns the
// CLI's output.
func runClaude(t *testing.T, e *apitest.Env, claude string, l apitest.LeasedRun, description string) []byte {
	t.Helper()
	fm := fakemodel.New()
	srv := httptest.NewServer(fm)
	t.Cleanup(func() { fm.Close(); srv.Close() })
	spec := agent.Spec{
		Session: runproto.Session{
			Ticket: runproto.SessionTicket{Key: "ACME-1", Type: "task", Title: "Parser", Description: description},
			Stage:  runproto.SessionStage{ID: "implement", Name: "implement", Adapter: runproto.ClaudeCode, Iteration: 1, MaxIterations: 1},
			MCP:    runproto.SessionMCP{URL: e.URL + "/api/v1/mcp"},
		},
		RunToken: l.Token, Workspace: t.TempDir(), Home: t.TempDir(),
		Environ: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "ANTHROPIC_BASE_URL=" + srv.URL,
			"ANTHROPIC_API_KEY=sk-fake", "CLAUDE_CODE_MAX_RETRIES=1"},
	}
	cmd, err := agent.Claude{Command: claude}.Prepare(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang guard, not a speed check
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args...)
	c.Env, c.Dir = cmd.Env, spec.Workspace
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	return out
}
