package uitest

import (
	"os"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// TestRunTranscript: a run whose runner uploaded the output claude-code
// printed against the fake model (recorded) shows on the ticket page as a
// conversation — the agent's words, its tool calls collapsed, its report —
// with the model, tokens and cost the run recorded and the raw log one
// click away; the stage report renders as Markdown, and the <script> and
// event handler an agent wrote into it never run.
func TestRunTranscript(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Write the file"})
	w.Admin(200, "PATCH", "/api/v1/items/ACME-1", map[string]any{"version": 1, "state": "ready"})
	run := w.Runner.MustLease()

	log, err := os.ReadFile(repoFile("internal/runner/agent/testdata/claude-done.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if r := w.Raw(w.Runner.Token, "POST", "/api/v1/runs/"+run.ID+"/log?offset=0", "application/octet-stream", log); r.Status != 200 {
		t.Fatalf("log upload: %d %s", r.Status, r.Body)
	}
	report := "## Done\n\nWrote **hello.txt**.\n\n<script>window.pwned = 1</script>\n\n<img src=x onerror=\"window.pwned = 2\">\n"
	if status, b := w.Runner.Report(run, "done", report); status != 200 {
		t.Fatalf("report: %d %s", status, b)
	}
	w.Must(200, w.Runner.Token, "POST", "/api/v1/runs/"+run.ID+"/finish", map[string]any{"exit_status": 0, "model": "claude-sonnet-4-5",
		"usage": map[string]any{"input_tokens": 8215, "output_tokens": 56, "cost_usd": 0.056}})

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/items/ACME-1#run-"+run.ID)
	p.WaitText(`[data-testid="transcript"]`, "I will write the file.")
	p.WaitText(`[data-testid="run-model"]`, "claude-sonnet-4-5")
	p.WaitText(`[data-testid="ticket-usage"]`, "8,215 tokens in")
	if n := p.Count(`[data-testid="transcript"] [data-kind="tool_call"] details:not([open])`); n != 1 {
		t.Errorf("%d collapsed tool calls, want 1 (Write)", n)
	}
	if got := p.Text(`[data-testid="transcript"] [data-kind="tool_call"] summary`); got == "" || !strings.Contains(got, "Write") {
		t.Errorf("the tool call reads %q, want Write", got)
	}
	p.WaitText(`[data-testid="transcript"] [data-kind="report"]`, "Wrote the file.")
	p.WaitText(`[data-testid="transcript"] [data-kind="usage"]`, "claude-sonnet-4-5")
	// The stage report: Markdown's own elements, the agent's HTML as text.
	p.WaitJS(`document.querySelector('.session [data-testid="report"] h2')?.textContent === "Done" &&
		document.querySelector('.session [data-testid="report"] strong')?.textContent === "hello.txt"`, "the report as Markdown")
	if Eval[bool](p, `window.pwned !== undefined || document.querySelector('[data-testid="report"] script, [data-testid="report"] img') !== null`) {
		t.Error("the report's <script> or event handler reached the page")
	}
	p.Check("ticket-transcript")

	p.ClickButton(`.session`, "Show the raw log")
	p.WaitText(`[data-testid="run-log"]`, `"type":"result"`)
	if Eval[bool](p, `window.pwned !== undefined`) {
		t.Error("a script ran")
	}
	p.Check("ticket-raw-log")
}
