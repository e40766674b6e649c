package uitest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// choose sets the select matching css to value as a person would (a
// change event).
func (p *Page) choose(css, value string) {
	p.T.Helper()
	ok := Eval[bool](p, fmt.Sprintf(`(s => { if (!s || ![...s.options].some(o => o.value === %[2]s)) return false;
		s.value = %[2]s; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })(document.querySelector(%[1]s))`,
		jsString(css), jsString(value)))
	if !ok {
		p.T.Fatalf("no select %s with the option %q on %s", css, value, p.location())
	}
}

// fieldError waits for the API's problem shown next to field and returns it.
func (p *Page) fieldError(field string) string {
	p.T.Helper()
	sel := fmt.Sprintf(`.field-error[data-field=%s]`, jsString(field))
	p.WaitJS(`document.querySelector(`+jsString(sel)+`)`, "the error next to "+field)
	if !Eval[bool](p, `document.querySelector(`+jsString(sel)+`).previousElementSibling?.closest(".field")?.querySelector("[aria-invalid=true]")?.getAttribute("aria-describedby")?.includes(document.querySelector(`+jsString(sel)+`).id)`) {
		p.T.Errorf("the field %s is not marked invalid and described by its error", field)
	}
	return p.Text(sel)
}

// awaitPath waits until the tab shows path.
func (p *Page) awaitPath(path string) {
	p.T.Helper()
	p.WaitJS(`location.pathname === `+jsString(path)+` && document.body.dataset.ready === "1"`, "the page "+path)
}

// TestAdministration (issue 27, §3): an organization, a project, members
// and a token are made from the web UI alone, each form showing the API's
// field problem next to its field; removing a member and revoking a token
// ask first; a webhook's signing secret and a token's are shown once; the
// notification settings save. Every page passes axe-core and logs no
// console error (Page.Check).
func TestAdministration(t *testing.T) {
	w := NewWorld(t, func(c *config.Config) { c.Notify.AllowPrivateTargets = true })
	p := NewPage(t, w.URL)
	p.AllowConsole(`status of 400`) // the forms' refused submissions
	p.SignIn(apitest.BootstrapToken, "/orgs")

	// An organization: a bad slug is named next to its field, then fixed.
	p.ClickButton("main", "New organization")
	p.awaitPath("/orgs/new")
	p.Check("org-new")
	p.Type(`input[name="name"]`, "Umbrella Corp")
	if got := Eval[string](p, `document.querySelector('input[name="slug"]').value`); got != "umbrella-corp" {
		t.Errorf("the slug follows the name as %q", got)
	}
	p.Type(`input[name="slug"]`, "Bad Slug")
	p.ClickButton("main", "Create organization")
	if got := p.fieldError("slug"); !strings.Contains(got, "must be 3–40 lower-case letters") {
		t.Errorf("the slug's error reads %q", got)
	}
	p.Check("org-new-invalid")
	p.Type(`input[name="slug"]`, "umbrella")
	p.ClickButton("main", "Create organization")
	p.awaitPath("/orgs/umbrella/settings")
	p.WaitText("main h1", "Umbrella Corp")
	p.Check("org-page")

	// A project, with its repository; a bad key first.
	p.Click(`details.create summary`)
	p.Type(`form[aria-label="New project"] input[name="key"]`, "u")
	p.Type(`form[aria-label="New project"] input[name="name"]`, "Umbrella app")
	p.choose(`form[aria-label="New project"] select[name="repository.forge"]`, "git")
	p.Type(`form[aria-label="New project"] input[name="repository.url"]`, w.Repo.Bare)
	p.Type(`form[aria-label="New project"] input[name="budgets.per_day_usd"]`, "12.5")
	p.ClickButton("main", "Create project")
	if got := p.fieldError("key"); !strings.Contains(got, "must be an upper-case letter") {
		t.Errorf("the key's error reads %q", got)
	}
	p.Check("project-new-invalid")
	p.Type(`form[aria-label="New project"] input[name="key"]`, "umb")
	p.ClickButton("main", "Create project")
	p.awaitPath("/projects/UMB/settings")
	var proj struct {
		Name       string
		Repository *struct{ Forge, URL string }
		Budgets    struct {
			PerDayUSD *float64 `json:"per_day_usd"`
		}
	}
	w.Admin(200, "GET", "/api/v1/projects/UMB", nil).JSON(t, &proj)
	if proj.Name != "Umbrella app" || proj.Repository == nil || proj.Repository.Forge != "git" || proj.Repository.URL != w.Repo.Bare ||
		proj.Budgets.PerDayUSD == nil || *proj.Budgets.PerDayUSD != 12.5 {
		t.Errorf("the project made from the UI: %+v", proj)
	}
	p.Check("project-settings-new")

	// Members: ada in the organization, her role changed; bob only in the
	// project, then removed after a confirmation.
	p.Open("/orgs/umbrella/settings")
	p.Type(`form[aria-label="Add a member to Umbrella Corp"] input[name="subject"]`, "ada")
	p.choose(`form[aria-label="Add a member to Umbrella Corp"] select[name="role"]`, "member")
	p.ClickButton("main", "Add member")
	p.WaitText(`[data-testid="member"][data-subject="ada"]`, "ada")
	p.choose(`select[aria-label="Role of ada"]`, "admin")
	role := func(path, subject string) string {
		var ms struct {
			Members []struct{ Subject, Role string }
		}
		w.Admin(200, "GET", path, nil).JSON(t, &ms)
		for _, m := range ms.Members {
			if m.Subject == subject {
				return m.Role
			}
		}
		return ""
	}
	apitest.Await(t, "ada to become an admin", func() bool { return role("/api/v1/orgs/umbrella/members", "ada") == "admin" })
	p.Check("org-members")

	p.Open("/projects/UMB/members")
	p.Type(`input[name="subject"]`, "bob")
	p.choose(`select[name="role"]`, "viewer")
	p.ClickButton("main", "Add member")
	p.WaitText(`[data-testid="member"][data-subject="bob"]`, "bob")
	if r := role("/api/v1/projects/UMB/members", "bob"); r != "viewer" {
		t.Fatalf("bob's project role is %q, want viewer", r)
	}
	p.ClickButton("main", "Remove bob")
	checkDialog(t, p, "project-member-remove", "Remove bob?")
	p.ClickButton("dialog", "Keep them")
	p.WaitJS(`!`+dialogJS, "the dialog to close")
	if r := role("/api/v1/projects/UMB/members", "bob"); r != "viewer" {
		t.Fatalf("keeping bob removed him (%q)", r)
	}
	p.ClickButton("main", "Remove bob")
	p.ClickButton("dialog", "Remove bob")
	p.WaitJS(`!document.querySelector('[data-testid="member"][data-subject="bob"]')`, "bob's row to go")
	if r := role("/api/v1/projects/UMB/members", "bob"); r != "" {
		t.Fatalf("bob still holds %q", r)
	}
	p.Check("project-members")

	// A token: its secret once, usable, then revoked.
	p.Open("/me/tokens")
	p.Type(`input[name="name"]`, "ci")
	p.choose(`select[name="organization"]`, "umbrella")
	p.choose(`select[name="role"]`, "member")
	p.Click(`form[aria-label="New token"] .checks label:first-child input`) // tracker.read
	p.choose(`select[name="expires_in"]`, "720h")
	p.ClickButton("main", "Create token")
	p.WaitText(`[data-testid="secret-value"]`, "ballet_")
	secret := strings.TrimSpace(p.Text(`[data-testid="secret-value"]`))
	p.WaitText(`[data-testid="token"][data-name="ci"]`, "tracker.read")
	p.Check("token-created")
	w.Must(200, secret, "GET", "/api/v1/projects/UMB", nil)
	w.Must(403, secret, "POST", "/api/v1/projects/UMB/items", map[string]any{"type": "task", "title": "scoped out"})
	p.ClickButton("main", "Done")
	p.WaitJS(`!document.querySelector('[data-testid="secret"]')`, "the secret to go")
	p.ClickButton("main", "Revoke ci")
	checkDialog(t, p, "token-revoke", "Revoke ci?")
	p.ClickButton("dialog", "Revoke ci")
	p.WaitText(`[data-testid="token"][data-name="ci"]`, "revoked")
	w.Must(401, secret, "GET", "/api/v1/projects/UMB", nil)

	// A project webhook: the whsec_ secret once, listed, deleted after a
	// confirmation.
	p.Open("/projects/UMB/webhooks")
	p.Type(`input[name="url"]`, "http://127.0.0.1:9/hook")
	p.choose(`select[name="format"]`, "slack")
	p.ClickButton("main", "Add webhook")
	p.WaitText(`[data-testid="secret-value"]`, "whsec_")
	p.WaitText(`[data-testid="webhook"]`, "http://127.0.0.1:9/hook")
	p.Check("webhook-created")
	p.ClickButton(`[data-testid="webhook"]`, "Deliveries")
	p.WaitText(`[data-testid="webhook"]`, "Nothing was sent to it yet")
	p.ClickButton(`[data-testid="webhook"]`, "Delete")
	checkDialog(t, p, "webhook-delete", "Delete the webhook to http://127.0.0.1:9/hook?")
	p.ClickButton("dialog", "Delete webhook")
	p.WaitJS(`!document.querySelector('[data-testid="webhook"]')`, "the webhook to go")
	var hooks struct{ Webhooks []any }
	w.Admin(200, "GET", "/api/v1/projects/UMB/webhooks", nil).JSON(t, &hooks)
	if len(hooks.Webhooks) != 0 {
		t.Errorf("after Delete the project has %d webhooks", len(hooks.Webhooks))
	}

	// Notification settings: an address refused (no mail here) with the
	// API's reason, then choices saved.
	p.Open("/me/notifications")
	p.Type(`input[name="email"]`, "ada@example.com")
	p.ClickButton("main", "Save notification settings")
	p.WaitText(`form[aria-label="Notification settings"] [role="alert"]`, "mail is not configured")
	Eval[bool](p, `(e => { e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); return true; })(document.querySelector('input[name="email"]'))`)
	p.choose(`select[name="causes.ticket.done"]`, "mail")
	p.choose(`select[name="digest"]`, "weekly")
	p.choose(`select[name="time_zone"]`, "Europe/Paris")
	p.ClickButton("main", "Save notification settings")
	p.WaitText(`[role="status"]`, "Saved.")
	var set struct {
		Causes   map[string]string
		Digest   string
		TimeZone string `json:"time_zone"`
	}
	w.Admin(200, "GET", "/api/v1/me/notifications", nil).JSON(t, &set)
	if set.Causes["ticket.done"] != "mail" || set.Digest != "weekly" || set.TimeZone != "Europe/Paris" {
		t.Errorf("the saved settings: %+v", set)
	}
	p.Check("notification-settings")

	// Start now says why a ready ticket would not start: its open blocker,
	// the paused project.
	w.Admin(201, "POST", "/api/v1/projects/UMB/items", map[string]any{"type": "task", "title": "First this"})
	w.Admin(201, "POST", "/api/v1/projects/UMB/items", map[string]any{"type": "task", "title": "Then this"})
	w.Admin(201, "POST", "/api/v1/items/UMB-2/blockers/UMB-1", nil)
	w.Admin(200, "PATCH", "/api/v1/items/UMB-2", map[string]any{"version": 1, "state": "ready"})
	var v struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/projects/UMB", nil).JSON(t, &v)
	w.Admin(200, "PATCH", "/api/v1/projects/UMB", map[string]any{"version": v.Version, "paused": true})
	p.Open("/items/UMB-2")
	p.WaitText(`[data-testid="start-hints"]`, "Blocked by UMB-1 (backlog)")
	p.WaitText(`[data-testid="start-hints"]`, "UMB is paused")
	p.Check("start-hints")
}
