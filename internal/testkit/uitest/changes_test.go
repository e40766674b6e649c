package uitest

import (
	"os"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// implementRun plays the implement stage of ACME-1 as the runner does with
// claude-code against the fake model (its recorded session:
// claude-done.ndjson, which writes hello.txt): it leases the run, uploads
// the session's log, pushes the commit the session made (with the
// runner's trailers) to ballet/ACME-1, reports and finishes. It returns
// the run's id and the branch's head.
func implementRun(t testing.TB, w *World) (run, head string) {
	t.Helper()
	r := w.Runner.MustLease()
	log, err := os.ReadFile(repoFile("internal/runner/agent/testdata/claude-done.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if resp := w.Raw(w.Runner.Token, "POST", "/api/v1/runs/"+r.ID+"/log?offset=0", "application/octet-stream", log); resp.Status != 200 {
		t.Fatalf("log upload: %d %s", resp.Status, resp.Body)
	}
	head = w.Repo.CommitFiles("ballet/ACME-1", map[string]string{"hello.txt": "health-check\n"},
		"ACME-1 implement: Wrote the file.\n\nBallet-Ticket: ACME-1\nBallet-Stage: implement\nBallet-Run: "+r.ID)
	if status, b := w.Runner.Report(r, "done", "Wrote the file."); status != 200 {
		t.Fatalf("report: %d %s", status, b)
	}
	w.Must(200, w.Runner.Token, "POST", "/api/v1/runs/"+r.ID+"/finish", map[string]any{"exit_status": 0, "model": "claude-sonnet-4-5",
		"usage": map[string]any{"input_tokens": 8215, "output_tokens": 56, "cost_usd": 0.056}})
	w.AwaitFlow("ACME-1", "the approval", func(f Flow) bool { return f.Waiting == "approval" })
	return r.ID, head
}

// TestApproveTheChanges: a ticket the fake model's session took to its
// human stage shows, on its page, its branch against main (merged into
// main: plain git, no pull request), the commit grouped under the stage
// that made it with a link to its run, the diff with the line the session
// wrote (unified and side by side) and, through that link, the session's
// transcript; the approval names the head it approves. Once the branch
// moves (a commit pushed directly), approving the head the page showed is
// refused with a message and the page shows the new head, whose approval
// then goes through and is recorded with it.
func TestApproveTheChanges(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Write the file", "state": "ready"})
	run, head := implementRun(t, w)

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/items/ACME-1")
	p.WaitText(`[data-testid="changes-branch"]`, "ballet/ACME-1")
	p.WaitText(`[data-testid="changes-branch"]`, "merge into main")
	if got := p.Text(`[data-testid="changes-head"]`); got != head[:7] {
		t.Errorf("the head reads %q, want %s", got, head[:7])
	}
	p.WaitText(`[data-testid="commit-group"][data-stage="implement"]`, "ACME-1 implement: Wrote the file.")
	p.WaitText(`[data-testid="file-diff"][data-path="hello.txt"] table.diff tr.add`, "health-check")
	if n := p.Count(`[data-testid="pull-request"]`); n != 0 {
		t.Errorf("plain git shows %d pull requests", n)
	}
	if p.HasButton("#flow", "Approve") || !p.HasButton("#flow", "Approve "+head[:7]) {
		t.Errorf("the approval does not name the head %s: %q", head[:7], p.Text(`[data-testid="approve-form"]`))
	}
	p.Check("ticket-changes")

	p.ClickButton(`[data-testid="changes"]`, "Split")
	p.WaitJS(`document.querySelector('[data-path="hello.txt"] table.diff.split td.code.add')?.textContent.includes("health-check")`, "the split diff")
	p.Check("ticket-changes-split")

	// The commit's run link opens the session's transcript.
	p.Click(`[data-testid="commit"] a[href="#run-` + run + `"]`)
	p.WaitText(`[data-testid="transcript"]`, "I will write the file.")
	p.Check("ticket-changes-transcript")

	// The branch moves under the page: the approval of what it showed is refused.
	moved := w.Repo.CommitFiles("ballet/ACME-1", map[string]string{"later.txt": "pushed after the review\n"}, "A later push")
	p.AllowConsole(`status of 409`)
	p.Type(`#decision-comment`, "Looks right")
	p.ClickButton("#flow", "Approve "+head[:7])
	p.WaitText(`#flow [role="alert"]`, "has moved to "+moved[:12])
	p.WaitText(`#flow [role="alert"]`, "now show the head "+moved[:7])
	p.WaitJS(`document.querySelector('[data-testid="changes-head"]')?.textContent === "`+moved[:7]+`"`, "the new head")
	p.WaitText(`[data-testid="file-diff"][data-path="later.txt"]`, "pushed after the review")
	if f := w.AwaitFlow("ACME-1", "still waiting", func(Flow) bool { return true }); f.Waiting != "approval" {
		t.Fatalf("after the refused approval the flow is %+v", f)
	}
	p.Check("ticket-changes-moved")

	p.ClickButton("#flow", "Approve "+moved[:7])
	w.AwaitFlow("ACME-1", "the flow to finish", func(f Flow) bool { return f.Status == "done" })
	p.WaitText(`[data-testid="flow-status"]`, "done")
	var hist struct {
		Events []struct {
			Type    string
			Payload struct{ Head, Report string }
		}
	}
	w.Admin(200, "GET", "/api/v1/items/ACME-1/events?limit=1000", nil).JSON(t, &hist)
	found := false
	for _, e := range hist.Events {
		found = found || (e.Type == "flow.done" && e.Payload.Head == moved && strings.Contains(e.Payload.Report, "Looks right"))
	}
	if !found {
		t.Errorf("no flow.done with head %s and the comment in %+v", moved, hist.Events)
	}
	p.Check("ticket-changes-approved")
}
