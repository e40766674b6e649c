package uitest

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ballet/ballet/internal/testkit/apitest"
)

// unreadIs is the expression that holds when the navigation's unread
// count reads n (the badge is there, empty, at zero).
func unreadIs(n int) string {
	return fmt.Sprintf(`document.querySelector('[data-testid="unread-count"]')?.dataset.count === "%d"`, n)
}

const notificationSel = `[data-testid="notification"]`

// TestNotificationsLive: blocking questions an agent asks on a ticket the
// signed-in person created reach their notifications page and the unread
// count of every open tab live, without a reload; one is marked read with
// its button (the other tab's count follows), the rest with Mark all read
// under the Unread filter, and following a notification's link marks it
// read and lands on the ticket's answer box, focused.
func TestNotificationsLive(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Pick a format", "state": "ready"})
	run := w.Runner.MustLease()

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/notifications")
	p.WaitText(`[data-testid="inbox-empty"]`, "No notifications yet")
	p.WaitJS(unreadIs(0), "the unread count")
	p.Check("notifications-empty")
	other := NewPage(t, w.URL) // another tab, on another page
	other.SignIn(apitest.BootstrapToken, "/orgs")
	other.WaitJS(unreadIs(0), "the other tab's unread count")
	p.NoReloadMark()
	other.NoReloadMark()

	// A question arrives: the list and both counts, live.
	w.Runner.Ask(run, "YAML or TOML?", true)
	p.WaitText(notificationSel+`[data-unread="1"][data-cause="question.opened"]`, "Question: YAML or TOML?")
	first := p.Text(notificationSel + ` a.target`)
	if first != "Unread: ACME-1 Pick a format" {
		t.Errorf("the notification's link reads %q, want the ticket's key and title", first)
	}
	if got := p.Text(notificationSel + ` .badge`); got != "Question waiting" {
		t.Errorf("the cause reads %q, want it in words", got)
	}
	p.WaitJS(unreadIs(1), "the unread count to reach 1")
	other.WaitJS(unreadIs(1), "the other tab's unread count to reach 1")
	if got := Eval[string](p, `document.querySelector('[data-testid="inbox-link"]').textContent`); got != "Notifications, 1 unread" {
		t.Errorf("the navigation link reads %q to a screen reader", got)
	}
	p.Check("notifications-live")

	// Marked read with its button: styling and both counts follow; the
	// focus goes to its link.
	p.ClickButton(notificationSel, "Mark read: ACME-1, Question waiting")
	p.WaitJS(`document.querySelector('`+notificationSel+`').dataset.unread === "0"`, "the notification to read as read")
	p.WaitJS(`document.activeElement?.matches('`+notificationSel+` a.target')`, "the focus on the notification's link")
	p.WaitJS(unreadIs(0), "the unread count to drop")
	other.WaitJS(unreadIs(0), "the other tab's unread count to drop")

	// Two more, then the Unread filter and Mark all read.
	w.Runner.Ask(run, "Tabs or spaces?", true)
	w.Runner.Ask(run, "Which licence?", true)
	p.WaitJS(`document.querySelectorAll('`+notificationSel+`[data-unread="1"]').length === 2`, "two new unread notifications")
	other.WaitJS(unreadIs(2), "the other tab's unread count to reach 2")
	if got := p.Text(notificationSel + ` .line`); got != "Question: Which licence?" {
		t.Errorf("the newest notification is %q, want the last question first", got)
	}
	// The arrow keys move between the notifications' links.
	p.Do(chromedp.Focus(chromedp.CSS(notificationSel+` a.target`), chromedp.NodeVisible), chromedp.KeyEvent(kb.ArrowDown))
	p.WaitJS(`document.activeElement === document.querySelectorAll('`+notificationSel+` a.target')[1]`, "ArrowDown to reach the second notification")
	p.Do(chromedp.KeyEvent("k"))
	p.WaitJS(`document.activeElement === document.querySelector('`+notificationSel+` a.target')`, "k to go back to the first")
	p.ClickButton(`[aria-label="Show"]`, "Unread")
	p.WaitJS(`location.search === "?filter=unread" && document.body.dataset.ready === "1" && document.querySelectorAll('`+notificationSel+`').length === 2`,
		"the unread ones alone")
	p.Check("notifications-unread")
	p.ClickButton("main", "Mark all read")
	p.WaitText(`[data-testid="inbox-empty"]`, "all caught up")
	p.WaitJS(unreadIs(0), "the unread count after Mark all read")
	other.WaitJS(unreadIs(0), "the other tab's unread count after Mark all read")
	p.Check("notifications-caught-up")
	p.ClickButton(`[aria-label="Show"]`, "All")
	p.WaitJS(`document.querySelectorAll('`+notificationSel+`[data-unread="0"]').length === 3`, "all three, read")

	// Following a new one's link: read, on the ticket's answer box.
	w.Runner.Ask(run, "Which port?", true)
	p.WaitJS(`document.querySelector('`+notificationSel+`')?.dataset.unread === "1"`, "the fourth notification")
	other.WaitJS(unreadIs(1), "the other tab's unread count to reach 1 again")
	p.NotReloaded()
	other.NotReloaded()
	p.Click(notificationSel + ` a.target`)
	p.WaitJS(`location.pathname === "/items/ACME-1" && location.hash === "#questions" && document.body.dataset.ready === "1"`, "the ticket page")
	p.WaitJS(`document.activeElement?.id?.startsWith("answer-")`, "the focus on an open question's answer box")
	p.WaitJS(unreadIs(0), "the unread count after following the link")
	other.WaitJS(unreadIs(0), "the other tab's unread count after following the link")
	p.Check("ticket-from-notification")

	var in struct {
		Unread        int
		Notifications []struct {
			Text   string
			ReadAt *string `json:"read_at"`
		}
	}
	w.Admin(200, "GET", "/api/v1/me/notifications/inbox", nil).JSON(t, &in)
	if in.Unread != 0 || len(in.Notifications) != 4 || in.Notifications[0].ReadAt == nil {
		t.Errorf("the inbox after the page: %+v, want 4 notifications, all read", in)
	}
}

// TestApprovalNotificationLandsOnApprove: an approval waiting reaches the
// ticket's creator; its link opens the ticket's flow with Approve focused.
func TestApprovalNotificationLandsOnApprove(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Ship it", "state": "ready"})
	w.Runner.Complete(w.Runner.MustLease(), "done", "implemented")
	w.AwaitFlow("ACME-1", "the approval", func(f Flow) bool { return f.Waiting == "approval" })

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/notifications")
	p.WaitText(notificationSel+`[data-cause="approval.waiting"] .badge`, "Approval waiting")
	p.WaitJS(unreadIs(1), "the unread count")
	p.Click(notificationSel + `[data-cause="approval.waiting"] a.target`)
	p.WaitJS(`location.pathname === "/items/ACME-1" && location.hash === "#flow" && document.body.dataset.ready === "1"`, "the ticket page")
	p.WaitJS(`document.activeElement?.textContent === "Approve"`, "the focus on Approve")
	p.WaitJS(unreadIs(0), "the unread count after following the link")
	p.Check("ticket-approval-from-notification")
}
