package uitest

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// World is a running Core with an organization "acme" and a project ACME
// on a real plain-git repository, and a runner driving the runner API as
// `ballet runner` does.
type World struct {
	*apitest.Env
	OrgID  string
	Repo   *apitest.GitRepo
	Runner *apitest.Runner
}

// NewWorld starts a Core (Start) and creates the organization, the project
// and the runner.
func NewWorld(t testing.TB, adjust ...func(*config.Config)) *World {
	t.Helper()
	repo := apitest.NewGitRepo(t)
	dir := t.TempDir()
	e := Start(t, append([]func(*config.Config){func(c *config.Config) {
		c.Jobs.Poll.Duration = 20 * time.Millisecond
		c.Storage.Path = dir + "/core.db" // the git mirror cache lives next to it
	}}, adjust...)...)
	w := &World{Env: e, Repo: repo}
	w.OrgID = e.Org("acme")
	e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": repo.Bare, "default_branch": "main"}})
	w.Runner = e.NewRunner("r1")
	return w
}

// Publish parses yaml with the API and publishes it as pipeline name of
// project ACME after version (0 for the first); it returns the new version.
func (w *World) Publish(name, yaml string, after int64) int64 {
	w.T.Helper()
	var parsed struct {
		Definition json.RawMessage `json:"definition"`
		Errors     []any           `json:"errors"`
	}
	w.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": yaml}).JSON(w.T, &parsed)
	if len(parsed.Errors) > 0 {
		w.T.Fatalf("pipeline %s: %v", name, parsed.Errors)
	}
	var v struct{ Version int64 }
	w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/"+name, map[string]any{"definition": parsed.Definition, "version": after}).JSON(w.T, &v)
	return v.Version
}

// Flow is the part of GET /api/v1/items/{item}/flow the tests look at.
type Flow struct {
	Stage, Status, Waiting string
}

// AwaitFlow polls a ticket's flow until cond holds, failing the test after
// apitest.HangGuard.
func (w *World) AwaitFlow(key, what string, cond func(Flow) bool) Flow {
	w.T.Helper()
	var f Flow
	apitest.Await(w.T, key+": "+what, func() bool {
		r := w.Do(apitest.BootstrapToken, "GET", "/api/v1/items/"+key+"/flow", nil)
		if r.Status != 200 {
			return false
		}
		r.JSON(w.T, &f)
		return cond(f)
	})
	return f
}

// SignIn signs the tab in with token through the API, as the sign-in page
// does (POST /api/v1/session from the page, so that the browser keeps the
// session cookie), then opens path.
func (p *Page) SignIn(token, path string) {
	p.T.Helper()
	p.Do(chromedp.Navigate(p.Base + "/signin"))
	p.WaitReady()
	status := Eval[int](p, fmt.Sprintf(`fetch("/api/v1/session", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({token: %s})}).then(r => r.status)`, jsString(token)))
	if status != 201 {
		p.T.Fatalf("POST /api/v1/session: %d, want 201", status)
	}
	p.Open(path)
}

// ClickButton clicks the visible button whose text or aria-label is name,
// within the element matching the CSS selector within ("" for the page),
// once it is enabled (a page may disable it while it checks something).
func (p *Page) ClickButton(within, name string) {
	p.T.Helper()
	p.WaitJS(buttonJS(within, name)+`?.disabled === false || `+buttonJS(within, name)+`?.matches("a")`,
		fmt.Sprintf("the button %q to be enabled", name))
	p.Do(chromedp.Click(chromedp.JSPath(buttonJS(within, name)), chromedp.NodeVisible))
}

// HasButton reports whether there is a visible button named name within
// the element matching within ("" for the page).
func (p *Page) HasButton(within, name string) bool {
	p.T.Helper()
	return Eval[bool](p, `!!`+buttonJS(within, name))
}

func buttonJS(within, name string) string {
	root := "document"
	if within != "" {
		root = fmt.Sprintf(`document.querySelector(%s)`, jsString(within))
	}
	return fmt.Sprintf(`[...(%s?.querySelectorAll("button, a.button, [role=button]") ?? [])].find(b =>
		b.getClientRects().length > 0 && ((b.getAttribute("aria-label") ?? "").trim() === %[2]s || b.textContent.trim() === %[2]s))`,
		root, jsString(name))
}

// NoReloadMark marks the document so that NotReloaded can tell that the
// page was updated in place, not loaded again.
func (p *Page) NoReloadMark() {
	p.T.Helper()
	Eval[bool](p, `window.__uitestNoReload = true`)
}

// NotReloaded fails the test when the document marked by NoReloadMark was
// replaced.
func (p *Page) NotReloaded() {
	p.T.Helper()
	if !Eval[bool](p, `window.__uitestNoReload === true`) {
		p.T.Errorf("the page was loaded again; it had to update in place")
	}
}

// Render returns the canonical YAML of a pipeline given as YAML (the API's
// parse, then render).
func (w *World) Render(yaml string) string {
	w.T.Helper()
	var parsed struct {
		Definition json.RawMessage `json:"definition"`
	}
	w.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": yaml}).JSON(w.T, &parsed)
	var out struct{ YAML string }
	w.Admin(200, "POST", "/api/v1/pipelines/render", map[string]any{"definition": parsed.Definition}).JSON(w.T, &out)
	return out.YAML
}

// Downloads lets the tab download files into a folder of the test and
// returns it.
func (p *Page) Downloads() string {
	p.T.Helper()
	dir := p.T.TempDir()
	_, err := chromedp.CallBrowser(p.Ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, BrowserContextID: chromedp.FromContext(p.Ctx).BrowserContextID, DownloadPath: dir})
	if err != nil {
		p.T.Fatalf("allow downloads: %v", err)
	}
	return dir
}

// AwaitFile waits until the browser has written a download (Chromium
// renames it to its name once complete) and returns its content.
func (p *Page) AwaitFile(path string) []byte {
	p.T.Helper()
	var b []byte
	apitest.Await(p.T, "the download "+path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	return b
}
