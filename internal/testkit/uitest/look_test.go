package uitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// lookWorld is a project with a ticket waiting for its approval after one
// agent run (ACME-2, in epic ACME-1), one in the backlog (ACME-3) and a
// default pipeline published twice.
func lookWorld(t *testing.T) *World {
	t.Helper()
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "epic", "title": "Config"})
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Parse the config file", "epic": "ACME-1", "state": "ready"})
	w.Runner.Complete(w.Runner.MustLease(), "done", "implemented")
	w.AwaitFlow("ACME-2", "the approval", func(f Flow) bool { return f.Waiting == "approval" })
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Write the docs"})
	w.Publish("default", strings.Replace(approvalPipeline, "max_iterations: 2", "max_iterations: 3", 1), 1)
	return w
}

// selected is the key (or item) of the entry j/k selected, "" for none.
const selectedJS = `(document.querySelector('[data-nav][data-selected="true"]')?.dataset.key ?? document.querySelector('[data-nav][data-selected="true"]')?.dataset.item ?? "")`

// TestKeyboardShortcuts presses the shortcuts in Chromium: j/k walk the
// board's cards, Enter opens one, g b comes back to its board, / focuses
// the filter, where typing j is text and no shortcut, g n goes to Needs
// me, where j selects the entry and Enter opens where it is resolved, and
// ? shows the help, which Escape closes.
func TestKeyboardShortcuts(t *testing.T) {
	w := lookWorld(t)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/projects/ACME")
	p.Click("h1") // the page's checks tabbed through it: the focus goes back to the page

	// Document order: the backlog's cards (ACME-1, ACME-3), then in progress.
	order := Eval[[]string](p, `[...document.querySelectorAll('[data-nav]')].map(e => e.dataset.key)`)
	if len(order) != 3 {
		t.Fatalf("the board's cards: %v, want 3", order)
	}
	p.Press("j")
	p.WaitJS(selectedJS+` === `+jsString(order[0]), "j to select the first card")
	if got := Eval[string](p, `document.activeElement.textContent`); got != order[0] {
		t.Errorf("after j the focus is on %q, want the link of %s", got, order[0])
	}
	p.Press("j")
	p.Press("j")
	p.Press("j") // stops at the last card
	p.WaitJS(selectedJS+` === `+jsString(order[2]), "j j j to select the last card")
	p.Press("k")
	p.WaitJS(selectedJS+` === `+jsString(order[1]), "k to select the card before")
	if n := p.Count(`[data-selected="true"]`); n != 1 {
		t.Errorf("%d entries are selected, want 1", n)
	}
	p.Screenshot("board-selected")
	p.Press(kb.Enter)
	p.WaitJS(`location.pathname === "/items/`+order[1]+`" && document.body.dataset.ready === "1"`, "Enter to open the selected ticket")

	p.Press("gb")
	p.WaitJS(`location.pathname === "/projects/ACME" && document.body.dataset.ready === "1"`, "g b to go back to the board")

	// / focuses the filter; typing there is text, not shortcuts.
	p.Press("/")
	p.WaitJS(`document.activeElement?.matches('input[type="search"]')`, "/ to focus the board's filter")
	p.Press("docs")
	p.WaitJS(`document.querySelectorAll('[data-testid="card"]').length === 1`, "the filter to leave one card")
	if got := Eval[string](p, `document.activeElement.value`); got != "docs" {
		t.Errorf("the filter holds %q, want docs", got)
	}
	if got := Eval[string](p, selectedJS); got != "" {
		t.Errorf("typing in the filter selected %q", got)
	}
	if !strings.Contains(p.Text(`[data-testid="count"]`), "1 of 3") {
		t.Errorf("the count says %q, want 1 of 3", p.Text(`[data-testid="count"]`))
	}
	p.Press("g")
	p.Press("n")
	if Eval[string](p, `location.pathname`) != "/projects/ACME" {
		t.Errorf("g n typed in the filter left the board")
	}

	// Leave the field (Escape does not; a click on the page does), then g n.
	p.Click("h1")
	p.Press("gn")
	p.WaitJS(`location.pathname === "/needs-me" && document.body.dataset.ready === "1"`, "g n to go to Needs me")
	p.Press("j")
	p.WaitJS(selectedJS+` === "ACME-2"`, "j to select the approval in Needs me")
	p.Press("?")
	p.WaitJS(`document.querySelector('dialog[data-testid="shortcuts"]')?.open`, "? to show the shortcuts")
	if txt := p.Text(`dialog[data-testid="shortcuts"]`); !strings.Contains(txt, "Go to the board") || !strings.Contains(txt, "Go to Needs me") {
		t.Errorf("the help says %q", txt)
	}
	p.Press("j") // no shortcut under the dialog
	vs, err := p.Axe()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("accessibility of the shortcuts' help: %s", v)
	}
	p.Screenshot("shortcuts-help")
	p.Press(kb.Escape)
	p.WaitJS(`!document.querySelector('dialog[data-testid="shortcuts"]')`, "Escape to close the help")
	p.Press("k")
	p.WaitJS(selectedJS+` === "ACME-2"`, "the one entry to stay selected")
	p.Click("h1") // the focus leaves the entry's link: Enter opens the selection
	p.Press(kb.Enter)
	p.WaitJS(`location.pathname === "/items/ACME-2" && location.hash === "#flow"`, "Enter to open where the approval is given")
}

// TestBoardCardsAndEmptyStates: a card says what its runs cost so far
// and marks the ticket that waits for a person; a board, a filter and
// Needs me without entries say what to do next.
func TestBoardCardsAndEmptyStates(t *testing.T) {
	w := lookWorld(t)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/projects/ACME")

	waiting := `[data-testid="card"][data-key="ACME-2"]`
	if got := p.Text(waiting + ` [data-testid="needs-you"]`); got != "Needs you: approve" {
		t.Errorf("ACME-2's mark: %q", got)
	}
	if got := p.Text(waiting + ` [data-testid="cost"]`); got != "$0.01 so far" { // the test runner's usage
		t.Errorf("ACME-2's cost: %q", got)
	}
	if n := p.Count(`[data-needs-you]`); n != 1 {
		t.Errorf("%d cards need you, want 1 (ACME-2)", n)
	}
	if n := p.Count(`[data-key="ACME-3"] [data-testid="cost"]`); n != 0 {
		t.Errorf("a ticket that never started shows a cost")
	}

	p.Open("/projects/ACME?q=nothing+like+this")
	p.Click("h1")
	p.WaitText(`[data-testid="board-empty"]`, "No ticket matches these filters.")
	p.ClickButton(`[data-testid="board-empty"]`, "Clear the filters")
	p.WaitJS(`document.querySelectorAll('[data-testid="card"]').length === 3 && location.search === ""`, "the filters cleared")

	w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "NEW", "name": "New"})
	p.Open("/projects/NEW")
	p.Click("h1")
	p.WaitText(`[data-testid="board-empty"]`, "No tickets yet.")
	p.ClickButton(`[data-testid="board-empty"]`, "Create the first ticket")
	p.WaitJS(`document.querySelector("details.create")?.open && document.activeElement?.closest('form[aria-label="Create a ticket"]')`,
		"the create form open with the cursor in it")

	w.Admin(200, "POST", "/api/v1/items/ACME-2/flow/approve", nil)
	p.Open("/needs-me")
	p.WaitText(`[data-testid="needs-me-empty"]`, "Nothing waits for you.")
	if n := p.Count(`[data-testid="needs-me-empty"] a[href="/orgs"]`); n != 1 {
		t.Errorf("the empty Needs me has no way to the boards")
	}
}

// TestPipelineVersionsCompared: the pipelines page draws its graph at a
// readable size and diffs two published versions.
func TestPipelineVersionsCompared(t *testing.T) {
	w := lookWorld(t)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/projects/ACME/pipelines")

	p.WaitText(`[data-testid="diff-summary"]`, "1 line added, 1 removed.")
	if got := p.Text(`[data-testid="version-diff"] .del`); !strings.Contains(got, "max_iterations: 2") {
		t.Errorf("the removed line: %q", got)
	}
	if got := p.Text(`[data-testid="version-diff"] .add`); !strings.Contains(got, "max_iterations: 3") {
		t.Errorf("the added line: %q", got)
	}
	p.Check("pipeline-versions-diff")
	p.choose(`[data-testid="diff-from"]`, "2")
	p.WaitText(`[data-testid="diff-summary"]`, "The same version.")
	if n := p.Count(`[data-testid="version-diff"]`); n != 0 {
		t.Errorf("a version compared with itself shows a diff")
	}
	// Text in the graph is as large as the page's: 14 px at least.
	if px := Eval[float64](p, `Math.min(...[...document.querySelectorAll('[data-testid="pipeline-graph"] .pg-node text')].map(t => t.getBoundingClientRect().height))`); px < 12 {
		t.Errorf("the graph's stage names are %.1f px high; too small to read", px)
	}
	p.Check("pipeline-versions")
}

// TestDarkScheme opens the pages in the dark colour scheme: the tokens
// switch, and axe-core (colour contrast included) finds nothing.
func TestDarkScheme(t *testing.T) {
	w := lookWorld(t)
	p := NewPage(t, w.URL)
	p.ColorScheme("dark")
	p.SignIn(apitest.BootstrapToken, "/needs-me")
	if bg := Eval[string](p, `getComputedStyle(document.documentElement).backgroundColor`); bg != "rgb(13, 17, 23)" {
		t.Fatalf("the dark page's background is %s", bg)
	}
	for _, path := range []string{"/orgs", "/projects/ACME", "/projects/ACME/pipelines", "/projects/ACME/settings",
		"/items/ACME-2", "/notifications", "/me/tokens", "/platform"} {
		p.Open(path)
	}
	// The YAML editor colours its tokens with the scheme's syntax colours
	// (a key GitHub's dark green), not CodeMirror's light ones.
	p.Open("/projects/ACME/pipelines")
	p.Click("#tab-yaml")
	keyColour := `(() => { const s = [...document.querySelectorAll('.cm-content .cm-line span')].find(s => s.textContent === 'stages'); return s ? getComputedStyle(s).color : ''; })()`
	p.WaitJS(keyColour+` !== ''`, "the YAML editor's key stages")
	if c := Eval[string](p, keyColour); c != "rgb(126, 231, 135)" {
		t.Errorf("a YAML key in the dark scheme is %s, want rgb(126, 231, 135) (--hl-name)", c)
	}
	p.Check("pipeline-yaml-dark")
	p.ColorScheme("light")
	p.Open("/projects/ACME")
	if bg := Eval[string](p, `getComputedStyle(document.documentElement).backgroundColor`); bg != "rgb(255, 255, 255)" {
		t.Errorf("the light page's background is %s", bg)
	}
}

// ReadmeShotsEnv set to a folder makes TestReadmeScreenshots write the
// README's screenshots there (docs/screenshots from the repository's
// root: BALLET_README_SHOTS=$PWD/docs/screenshots).
const ReadmeShotsEnv = "BALLET_README_SHOTS"

// TestReadmeScreenshots writes the README's pictures of the board and of
// a ticket waiting for its approval, at a laptop's size; only when
// $BALLET_README_SHOTS names a folder.
func TestReadmeScreenshots(t *testing.T) {
	dir := os.Getenv(ReadmeShotsEnv)
	if dir == "" {
		t.Skip(ReadmeShotsEnv + " is not set")
	}
	w := lookWorld(t)
	for _, title := range []string{"Retry failed webhook deliveries", "Show the diff beside Approve", "Dark mode follows the system"} {
		w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": title})
	}
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Board loses its filter on reload", "state": "ready"})
	p := NewPage(t, w.URL)
	p.Do(chromedp.EmulateViewport(1440, 900))
	p.SignIn(apitest.BootstrapToken, "/projects/ACME")
	p.WaitJS(`document.querySelectorAll('[data-testid="card"]').length === 7`, "the board's seven cards")
	// shot captures the screen scrolled to the element at css (the top
	// when "").
	shot := func(name, css string) {
		t.Helper()
		// The page's checks tabbed through it: no focus.
		Eval[bool](p, `(document.activeElement?.blur(), scrollTo(0, 0), `+jsString(css)+` && document.querySelector(`+jsString(css)+`).scrollIntoView({block: "start"}), true)`)
		img, err := chromedp.Run(p.Ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if len(img) > 300<<10 {
			t.Errorf("%s is %d KB; keep it under 300 KB", name, len(img)>>10)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d KB)", filepath.Join(dir, name), len(img)>>10)
	}
	shot("board.png", "")

	// The ticket's branch: what the agent's run committed, which the page
	// shows beside the approval.
	var runs struct{ Runs []struct{ ID string } }
	w.Admin(200, "GET", "/api/v1/items/ACME-2/runs", nil).JSON(t, &runs)
	if len(runs.Runs) == 0 {
		t.Fatal("ACME-2 has no run")
	}
	w.Repo.CommitFiles("ballet/ACME-2", readmeChange, "ACME-2 implement: parse the config file\n\nBallet-Ticket: ACME-2\nBallet-Stage: implement\nBallet-Run: "+runs.Runs[0].ID)
	p.Open("/items/ACME-2#flow")
	p.WaitJS(`document.querySelectorAll('[data-testid="file-diff"][data-highlighted="1"]').length === 2`, "the diff, highlighted")
	shot("ticket.png", "#flow")
}

// readmeChange is the change the README's ticket shows: a small Go
// parser and its test.
var readmeChange = map[string]string{
	"internal/config/parse.go": `// Package config reads the service's configuration file.
package config

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Parse reads key = value lines; blank lines and # comments are skipped.
func Parse(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want key = value, got %q", n, line)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, s.Err()
}
`,
	"internal/config/parse_test.go": `package config

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader("# defaults\nport = 8080\n\nname = acme\n"))
	if err != nil || got["port"] != "8080" || got["name"] != "acme" {
		t.Fatalf("Parse: %v, %v", got, err)
	}
	if _, err := Parse(strings.NewReader("port 8080")); err == nil {
		t.Fatal("a line without = parsed")
	}
}
`,
}

// TestKeyboardAdminLists: j/k walk the administration's lists as they do
// the board: Enter opens an organization or a project; a member, a token
// or a runner has no page of its own, so Enter puts the focus on the
// control that acts on it (its role, Revoke, Drain), which then takes the
// person's next key.
func TestKeyboardAdminLists(t *testing.T) {
	w := NewWorld(t)
	w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "ci", "organization": "acme", "role": "member"})
	w.Admin(200, "PUT", "/api/v1/projects/ACME/members/vic", map[string]any{"role": "member"})
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/orgs")
	p.Click("h1")
	selected := `(document.querySelector('[data-nav][data-selected="true"]') ?? null)`
	p.Press("j")
	p.WaitJS(selected+`?.dataset.org === "acme"`, "j to select the organization")
	p.Press("j")
	p.WaitJS(selected+`?.dataset.key === "ACME"`, "j to select its project")
	p.Press("k")
	p.WaitJS(selected+`?.dataset.org === "acme"`, "k to select the organization again")
	p.Press(kb.Enter)
	p.WaitJS(`location.pathname === "/orgs/acme/settings" && document.body.dataset.ready === "1"`, "Enter to open the organization")
	p.Click("h1")
	p.Press("j")
	p.WaitJS(selected+`?.dataset.key === "ACME"`, "j to select the organization's project")
	p.Press(kb.Enter)
	p.WaitJS(`location.pathname === "/projects/ACME" && document.body.dataset.ready === "1"`, "Enter to open the project")

	acts := []struct{ path, testid, control string }{
		{"/projects/ACME/members", "member", "select"},
		{"/me/tokens", "token", "button"},
		{"/runners", "runner", "button"},
	}
	for _, a := range acts {
		p.Open(a.path)
		p.Click("h1")
		p.Press("j")
		p.WaitJS(selected+`?.dataset.testid === "`+a.testid+`"`, "j to select the first "+a.testid)
		if got := Eval[bool](p, `document.activeElement === `+selected); !got {
			t.Errorf("%s: after j the focus is not on the selected row", a.path)
		}
		p.Press(kb.Enter)
		p.WaitJS(`document.activeElement?.matches('[data-testid="`+a.testid+`"] `+a.control+`[data-open]')`, "Enter to focus the "+a.testid+"'s control")
		if n := p.Count(`dialog[open]`); n != 0 {
			t.Errorf("%s: Enter on the selected %s opened a dialog: it must only focus its control", a.path, a.testid)
		}
	}
	p.Screenshot("admin-list-selected")
}
