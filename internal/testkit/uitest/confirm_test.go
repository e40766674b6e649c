package uitest

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

const dialogJS = `document.querySelector('dialog[data-testid="confirm"]')`

// checkDialog checks an open confirmation: a modal dialog named by its
// heading and described by its text, the focus on the button that leaves
// things as they are and kept inside the dialog by Tab, no axe-core
// violation; then a screenshot.
func checkDialog(t *testing.T, p *Page, name, title string) {
	t.Helper()
	p.WaitJS(dialogJS+`?.open === true`, "the confirmation dialog")
	if got := Eval[string](p, `document.getElementById(`+dialogJS+`.getAttribute("aria-labelledby")).textContent`); got != title {
		t.Errorf("the dialog is named %q, want %q", got, title)
	}
	if !Eval[bool](p, dialogJS+`.matches(":modal") && !!document.getElementById(`+dialogJS+`.getAttribute("aria-describedby"))?.textContent`) {
		t.Error("the dialog is not modal or has no description")
	}
	if got := Eval[string](p, `document.activeElement.closest("dialog") ? document.activeElement.textContent : "(outside the dialog)"`); !strings.HasPrefix(got, "Keep") {
		t.Errorf("the focus opens on %q, want the button that keeps things as they are", got)
	}
	// Tab reaches both buttons and nothing behind the dialog (past its
	// last button the focus may leave the document for the browser's own
	// controls, as with any modal <dialog>).
	seen := map[string]bool{}
	for range 5 {
		p.Tab()
		where := Eval[string](p, `(e => e === document.body ? "" : e.closest("dialog") ? e.textContent : "outside: " + e.outerHTML.slice(0, 80))(document.activeElement)`)
		if strings.HasPrefix(where, "outside: ") {
			t.Fatalf("Tab reached the page behind the modal dialog: %s", where)
		}
		seen[where] = true
	}
	if n := len(seen) - map[bool]int{true: 1}[seen[""]]; n != 2 {
		t.Errorf("Tab reached %d of the dialog's 2 buttons: %v", n, seen)
	}
	vs, err := p.Axe()
	if err != nil {
		t.Errorf("axe-core: %v", err)
	}
	for _, v := range vs {
		t.Errorf("accessibility of the dialog: %s", v)
	}
	p.Screenshot(name)
}

func (p *Page) escape() { p.T.Helper(); p.Do(chromedp.KeyEvent(kb.Escape)) }

// TestConfirmations: Start now of a ticket whose blocker is open shows the
// API's refusal naming it; cancelling a ticket and pulling or releasing the
// kill switch each ask first in a modal dialog, and keeping (its button or
// Escape) changes nothing.
func TestConfirmations(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "First this"})
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Then this"})
	w.Admin(201, "POST", "/api/v1/items/ACME-2/blockers/ACME-1", nil)
	w.Admin(200, "PATCH", "/api/v1/items/ACME-2", map[string]any{"version": 1, "state": "ready"}) // blocked: the scheduler leaves it
	state := func() string {
		var it struct{ State string }
		w.Admin(200, "GET", "/api/v1/items/ACME-2", nil).JSON(t, &it)
		return it.State
	}

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/items/ACME-2")
	p.AllowConsole(`status of 409`)
	p.ClickButton("header.ticket-head", "Start now")
	p.WaitText(`header.ticket-head [role="alert"]`, "ACME-2 is blocked by ACME-1 (backlog)")
	if st := state(); st != "ready" {
		t.Fatalf("after Start now of a blocked ticket it is %s", st)
	}
	p.Check("ticket-start-blocked")

	p.ClickButton("header.ticket-head", "Move to Cancelled")
	checkDialog(t, p, "ticket-confirm-cancel", "Cancel ACME-2?")
	p.ClickButton("dialog", "Keep it")
	p.WaitJS(`!`+dialogJS, "the dialog to close")
	if st := state(); st != "ready" {
		t.Fatalf("after keeping it the ticket is %s", st)
	}
	if !Eval[bool](p, `document.activeElement?.textContent === "Move to Cancelled"`) {
		t.Error("the focus did not go back to the button that opened the dialog")
	}
	p.ClickButton("header.ticket-head", "Move to Cancelled")
	p.WaitJS(dialogJS+`?.open === true`, "the dialog again")
	p.escape()
	p.WaitJS(`!`+dialogJS, "Escape to close the dialog")
	if st := state(); st != "ready" {
		t.Fatalf("after Escape the ticket is %s", st)
	}
	p.ClickButton("header.ticket-head", "Move to Cancelled")
	p.ClickButton("dialog", "Cancel ACME-2")
	p.WaitText(`[data-testid="state"]`, "Cancelled")
	if st := state(); st != "cancelled" {
		t.Fatalf("after confirming the ticket is %s", st)
	}

	paused := func() bool {
		var pl struct{ Paused bool }
		w.Admin(200, "GET", "/api/v1/platform", nil).JSON(t, &pl)
		return pl.Paused
	}
	p.Open("/platform")
	p.ClickButton("main", "Pull the kill switch")
	checkDialog(t, p, "platform-confirm-pull", "Pull the kill switch?")
	p.ClickButton("dialog", "Keep work running")
	p.WaitJS(`!`+dialogJS, "the dialog to close")
	if paused() {
		t.Fatal("keeping work running pulled the kill switch")
	}
	p.ClickButton("main", "Pull the kill switch")
	p.ClickButton("dialog", "Pull the kill switch")
	p.WaitText(`[data-testid="kill-switch"]`, "Pulled")
	if !paused() {
		t.Fatal("confirming did not pull the kill switch")
	}
	p.ClickButton("main", "Release the kill switch")
	checkDialog(t, p, "platform-confirm-release", "Release the kill switch?")
	p.ClickButton("dialog", "Release the kill switch")
	p.WaitText(`[data-testid="kill-switch"]`, "Released")
	if paused() {
		t.Fatal("confirming did not release the kill switch")
	}
	p.Check("platform-released")
}
