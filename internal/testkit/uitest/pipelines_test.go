package uitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// lineOf returns the 1-based line of the nth (1-based) line of text equal
// to want once trimmed.
func lineOf(t *testing.T, text, want string, nth int) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == want {
			if nth--; nth == 0 {
				return i + 1
			}
		}
	}
	t.Fatalf("no line %q (#%d) in\n%s", want, nth, text)
	return 0
}

// TestPipelineEditor: a duplicate stage id typed in the form shows on that
// field and at its line of the YAML; fixed, it publishes as version 2,
// which History lists; version 1 loaded from History publishes as version
// 3. A version published from the API meanwhile makes the next publish fail,
// offering to load it.
func TestPipelineEditor(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/projects/ACME/pipelines")
	id1 := `[data-testid="stages[1].id"]`
	p.WaitJS(`document.querySelector('`+id1+`')?.value === "approve"`, "the form with version 1")

	p.Type(id1, "implement")
	p.WaitJS(`document.querySelector('`+id1+`').getAttribute("aria-invalid") === "true"`, "the duplicate id marked on its field")
	p.WaitText(`[data-testid="problems:stages[1].id"]`, "implement")
	dup := w.Render(strings.Replace(approvalPipeline, "id: approve", "id: implement2", 1))
	line := lineOf(t, strings.Replace(dup, "implement2", "implement", 1), "- id: implement", 2)
	// The problem's button to its place in the YAML reads "line N:C in the YAML".
	lineButton := fmt.Sprintf(`[...document.querySelectorAll('[data-testid="problems"] button')].filter(b => /^line %d(:|\s|$)/.test(b.textContent.trim()))`, line)
	if Eval[int](p, lineButton+`.length`) != 1 {
		t.Errorf("the problem is not placed at line %d of the YAML:\n%s", line, p.Text(`[data-testid="problems"]`))
	}
	if p.HasButton("", "Publish") && Eval[bool](p, `[...document.querySelectorAll("button")].find(b => b.textContent.trim() === "Publish").disabled === false`) {
		t.Errorf("Publish is enabled while there are problems")
	}
	p.Check("pipelines-problem")
	p.Do(chromedp.Click(chromedp.JSPath(lineButton+`[0]`), chromedp.NodeVisible))
	p.WaitJS(`document.querySelector('#tab-yaml').getAttribute("aria-selected") === "true"`, "the YAML tab")
	p.WaitJS(`document.querySelector(".cm-activeLine")?.textContent.trim() === "- id: implement"`, "the cursor on the problem's line")
	p.Check("pipelines-problem-yaml")

	p.ClickButton(`[role="tablist"]`, "Stages")
	p.Type(id1, "approve")
	p.WaitJS(`!document.querySelector('[data-testid="problems"]') && document.querySelector('`+id1+`').getAttribute("aria-invalid") !== "true"`, "the problem gone")
	p.Type(`[data-testid="stages[1].name"]`, "Sign-off")
	p.ClickButton("", "Publish")
	p.WaitText(`[data-testid="notice"]`, "Published version 2")
	p.WaitJS(`document.querySelector('[data-testid="history"] tbody tr')?.cells[0].textContent.trim() === "2"`, "version 2 first in History")
	p.Check("pipelines-published-2")

	p.ClickButton(`[data-testid="history"]`, "Load version 1")
	p.WaitText(`[data-testid="notice"]`, "Version 1 is in the editor")
	p.WaitJS(`document.querySelector('[data-testid="stages[1].name"]')?.value === "Approve"`, "version 1 in the form")
	p.ClickButton("", "Publish")
	p.WaitText(`[data-testid="notice"]`, "Published version 3")
	var v3 struct {
		Version    int64
		Definition struct{ Stages []struct{ ID, Name string } }
	}
	w.Admin(200, "GET", "/api/v1/projects/ACME/pipelines/default", nil).JSON(t, &v3)
	if v3.Version != 3 || len(v3.Definition.Stages) != 2 || v3.Definition.Stages[1].Name != "Approve" {
		t.Fatalf("the newest version after publishing version 1 again: %+v", v3)
	}

	// Someone publishes version 4 from the API while the page shows 3.
	w.Publish("default", strings.Replace(approvalPipeline, "name: Approve", "name: Theirs", 1), 3)
	p.Type(`[data-testid="stages[0].name"]`, "Mine")
	p.AllowConsole(`status of 409 \(Conflict\) \(http://127\.0\.0\.1:\d+/api/v1/projects/ACME/pipelines/default:1\)$`) // the refusal itself
	p.ClickButton("", "Publish")
	p.WaitText(`[data-testid="conflict"]`, "")
	p.Check("pipelines-conflict")
	p.ClickButton(`[data-testid="conflict"]`, "Load the newer version")
	p.WaitJS(`document.querySelector('[data-testid="stages[1].name"]')?.value === "Theirs"`, "version 4 in the form")
	p.WaitJS(`!document.querySelector('[data-testid="conflict"]')`, "the conflict gone")
}

// TestPipelineImportExport: a YAML file (comments, another field order)
// imported and exported comes back as the canonical render, byte for byte.
func TestPipelineImportExport(t *testing.T) {
	w := NewWorld(t)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/projects/ACME/pipelines")
	p.WaitJS(`document.querySelector('[data-testid="stages[0].id"]')`, "the form")
	file := filepath.Join(t.TempDir(), "mine.yaml")
	mine := "# ours\nstages:\n  - kind: agent   # first\n    id: build\n    name: Build\n  - {id: check, kind: human}\nmax_iterations: 4\n"
	if err := os.WriteFile(file, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Do(chromedp.SetUploadFiles(chromedp.CSS(`[data-testid="import-yaml"]`), []string{file}))
	p.WaitText(`[data-testid="notice"]`, "Imported mine.yaml")
	p.WaitJS(`document.querySelector('[data-testid="stages[1].id"]')?.value === "check"`, "the imported pipeline in the form")
	p.Check("pipelines-imported")

	dir := p.Downloads()
	p.ClickButton("", "Export YAML")
	got := p.AwaitFile(filepath.Join(dir, "ACME-default.yaml"))
	if want := w.Render(mine); string(got) != want {
		t.Errorf("exported:\n%s\nwant the canonical render:\n%s", got, want)
	}
}
