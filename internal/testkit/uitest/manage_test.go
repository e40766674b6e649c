package uitest

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// TestRenameAndDrain (issue 27, §3): an organization admin renames the
// organization on its page — a rename made meanwhile by someone else is
// refused with the API's message, then the rename goes through — and a
// project's name and forge settings on its settings page, the API's
// problem shown next to its field; a platform admin drains a runner from
// the runners page and puts it back, each after a confirmation. Every page
// passes axe-core and logs no console error but the refused writes.
func TestRenameAndDrain(t *testing.T) {
	w := NewWorld(t)
	p := NewPage(t, w.URL)
	p.AllowConsole(`status of (400|409)`) // the refused writes below
	p.SignIn(apitest.BootstrapToken, "/orgs/acme/settings")

	// The organization: a stale rename, then a good one.
	var o struct {
		Name, Slug string
		Version    int64
	}
	w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &o)
	p.WaitJS(`document.querySelector('form[aria-label="Rename organization"] input[name="name"]')?.value === `+jsString(o.Name), "the rename form")
	p.Check("org-rename")
	w.Admin(200, "PATCH", "/api/v1/orgs/acme", map[string]any{"version": o.Version, "name": "Acme Elsewhere"})
	p.Type(`form[aria-label="Rename organization"] input[name="name"]`, "Acme Stale")
	p.ClickButton("main", "Save name")
	p.WaitText(`form[aria-label="Rename organization"] [role="alert"]`, "changed by someone else")
	p.Check("org-rename-stale")
	p.Open("/orgs/acme/settings")
	p.WaitJS(`document.querySelector('form[aria-label="Rename organization"] input[name="name"]')?.value === "Acme Elsewhere"`, "the name read again")
	p.Type(`form[aria-label="Rename organization"] input[name="name"]`, "Acme Corporation")
	p.ClickButton("main", "Save name")
	p.WaitText(`[data-testid="org-renamed"]`, "Renamed to Acme Corporation.")
	p.WaitText("main h1", "Acme Corporation")
	w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &o)
	if o.Name != "Acme Corporation" || o.Slug != "acme" {
		t.Errorf("the organization after the rename: %+v", o)
	}
	var hist struct {
		Events []struct{ Type string }
	}
	w.Admin(200, "GET", "/api/v1/orgs/acme/events?limit=1000", nil).JSON(t, &hist)
	renames := 0
	for _, e := range hist.Events {
		if e.Type == "organization.updated" {
			renames++
		}
	}
	if renames != 2 {
		t.Errorf("%d organization.updated events, want 2 (the other writer's and the page's)", renames)
	}
	p.Check("org-renamed")

	// The project: a credentials reference that is no reference is named
	// next to its field; then the name and the reference are saved.
	p.Open("/projects/ACME/settings")
	p.Type(`form[aria-label="Project settings"] input[name="name"]`, "Acme web")
	p.Type(`form[aria-label="Project settings"] input[name="repository.credentials_ref"]`, "ghp_plaintoken")
	p.ClickButton("main", "Save settings")
	if got := p.fieldError("repository.credentials_ref"); got == "" {
		t.Error("no error next to the credentials reference")
	}
	p.Check("project-settings-invalid")
	Eval[bool](p, `(e => { e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); return true; })(document.querySelector('input[name="repository.credentials_ref"]'))`)
	p.ClickButton("main", "Save settings")
	p.WaitText(`form[aria-label="Project settings"] [role="status"]`, "Saved.")
	var proj struct{ Name string }
	w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &proj)
	if proj.Name != "Acme web" {
		t.Errorf("the project's name after saving: %q", proj.Name)
	}
	p.WaitText("main h1", "Acme web")
	p.Check("project-settings-renamed")

	// The runner: drained after a confirmation (Keep first), then undrained.
	p.Open("/runners")
	row := `[data-testid="runner"][data-name="r1"]`
	p.WaitText(row, "r1")
	p.ClickButton(row, "Drain")
	checkDialog(t, p, "runner-drain", "Drain r1?")
	p.ClickButton("dialog", "Keep it leasing")
	p.WaitJS(`!`+dialogJS, "the dialog to close")
	drained := func() bool {
		var l struct {
			Runners []struct {
				ID      string
				Drained bool
			}
		}
		w.Admin(200, "GET", "/api/v1/runners", nil).JSON(t, &l)
		for _, r := range l.Runners {
			if r.ID == w.Runner.ID {
				return r.Drained
			}
		}
		t.Fatalf("runner r1 is not listed")
		return false
	}
	if drained() {
		t.Fatal("keeping the runner drained it")
	}
	p.ClickButton(row, "Drain")
	p.ClickButton("dialog", "Drain runner")
	p.WaitJS(`document.querySelector('`+row+`')?.dataset.drained === "1"`, "the row to show the drain")
	p.WaitText(`[data-testid="runner-status"]`, "r1 is drained")
	if !drained() {
		t.Fatal("the runner is not drained after the confirmation")
	}
	p.Check("runner-drained")
	p.ClickButton(row, "Undrain")
	checkDialog(t, p, "runner-undrain", "Undrain r1?")
	p.ClickButton("dialog", "Undrain runner")
	p.WaitJS(`document.querySelector('`+row+`')?.dataset.drained === "0"`, "the row to show the runner back")
	if drained() {
		t.Fatal("the runner is still drained after the undrain")
	}
	var evs struct {
		Events []struct{ Type string }
	}
	w.Admin(200, "GET", "/api/v1/runners/"+w.Runner.ID+"/events?limit=1000", nil).JSON(t, &evs)
	var types []string
	for _, e := range evs.Events {
		if strings.HasPrefix(e.Type, "runner.") && e.Type != "runner.registered" && e.Type != "runner.updated" {
			types = append(types, e.Type)
		}
	}
	if strings.Join(types, ",") != "runner.drained,runner.undrained" {
		t.Errorf("the runner's events %v, want runner.drained then runner.undrained", types)
	}
	p.Check("runner-undrained")
}
