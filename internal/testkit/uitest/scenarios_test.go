package uitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/oidctest"
)

// approvalPipeline is one agent stage and a human approval.
const approvalPipeline = `max_iterations: 2
stages:
  - id: implement
    kind: agent
    name: Implement
  - id: approve
    kind: human
    name: Approve
`

// TestSignInWithToken: the sign-in form takes the bootstrap token and lands
// on Needs me, signed in; signing out ends the session on the server.
func TestSignInWithToken(t *testing.T) {
	w := NewWorld(t)
	p := NewPage(t, w.URL)
	p.Open("/signin")
	p.Type("#token", apitest.BootstrapToken)
	p.ClickButton("form", "Sign in")
	p.WaitJS(`location.pathname === "/needs-me" && document.body.dataset.ready === "1"`, "Needs me after signing in")
	p.WaitText(`[data-testid="user"]`, "bootstrap")
	p.Check("needs-me-after-sign-in")

	cookie := Eval[int](p, `fetch("/api/v1/session").then(r => r.status)`)
	if cookie != 200 {
		t.Fatalf("GET /api/v1/session with the cookie: %d, want 200", cookie)
	}
	p.ClickButton("header", "Sign out")
	p.WaitJS(`location.pathname === "/signin"`, "the sign-in page after signing out")
	if st := Eval[int](p, `fetch("/api/v1/session").then(r => r.status)`); st != 401 {
		t.Errorf("GET /api/v1/session after signing out: %d, want 401", st)
	}
}

// TestSignInWithOIDC: with a browser client configured, the sign-in page
// offers the issuer; its button goes through the issuer (on 127.0.0.1:
// authorization code with PKCE) and back, signed in, to where the person
// was going.
func TestSignInWithOIDC(t *testing.T) {
	iss := oidctest.New(t)
	iss.Client("ballet-ui", "ui-secret")
	iss.SignInAs("oidc|ola")
	w := NewWorld(t, func(c *config.Config) {
		c.Auth.OIDCIssuer, c.Auth.OIDCAudience = iss.URL, iss.Audience
		c.Auth.OIDCClientID, c.Auth.OIDCClientSecret = "ballet-ui", "ui-secret"
		c.Auth.PlatformAdmins = []string{"oidc|ola"}
	})
	p := NewPage(t, w.URL)
	p.Open("/signin?next=%2Fprojects%2FACME")
	p.ClickButton("main", "Sign in with OIDC")
	p.WaitJS(`location.pathname === "/projects/ACME" && document.body.dataset.ready === "1"`, "the board after the issuer")
	p.WaitText(`[data-testid="user"]`, "ola")
	p.Check("board-after-oidc")
	if st := Eval[int](p, `fetch("/api/v1/session").then(r => r.status)`); st != 200 {
		t.Fatalf("GET /api/v1/session after the OIDC sign-in: %d, want 200", st)
	}
}

// TestTicketFlow: create a ticket on the board, move it to ready and watch
// it start; on the ticket page the timeline follows the run live, and the
// human stage is approved there, without a reload.
func TestTicketFlow(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/projects/ACME")

	p.Click(`details.create > summary`)
	p.Type(`form[aria-label="Create a ticket"] input:not([type=checkbox])`, "Parse the config")
	p.ClickButton(`form[aria-label="Create a ticket"]`, "Create")
	p.WaitJS(`document.querySelector('[data-testid="column-backlog"] [data-key="ACME-1"]')`, "ACME-1 in Backlog")
	p.Check("board-created")

	p.NoReloadMark()
	p.ClickButton(`[data-key="ACME-1"]`, "Move ACME-1 to ready")
	w.AwaitFlow("ACME-1", "the flow to start", func(f Flow) bool { return f.Stage == "implement" })
	p.WaitJS(`document.querySelector('[data-testid="column-in_progress"] [data-key="ACME-1"] [data-testid="flow"]')?.textContent.includes("implement")`,
		"ACME-1 in progress on stage implement, live")
	p.NotReloaded()
	p.Check("board-started")

	p.Open("/items/ACME-1")
	last := Eval[int](p, `Number(document.querySelector('[data-testid="timeline"]').dataset.lastSeq)`)
	p.NoReloadMark()
	run := w.Runner.MustLease()
	w.Runner.Complete(run, "done", "implemented")
	p.WaitText(`[data-testid="flow-status"]`, "waits for approval")
	p.WaitJS(fmt.Sprintf(`Number(document.querySelector('[data-testid="timeline"]').dataset.lastSeq) > %d`, last), "the timeline to follow the run")
	p.Check("ticket-waits-approval")
	// The pinned pipeline's graph, opened, lights the stage the flow is at.
	p.Click(`details.flow-graph > summary`)
	p.WaitJS(`(() => { const lit = document.querySelectorAll('.flow-graph .pg-node.current');
		return lit.length === 1 && lit[0].dataset.stage === document.querySelector('[data-testid="flow-status"] strong').textContent })()`,
		"the graph with the current stage lit")
	p.Check("ticket-graph")

	p.Type(`#decision-comment`, "Looks right")
	p.ClickButton(`#flow`, "Approve")
	w.AwaitFlow("ACME-1", "the flow to finish", func(f Flow) bool { return f.Status == "done" })
	p.WaitText(`[data-testid="flow-status"]`, "done")
	p.WaitText(`[data-testid="timeline"]`, "Looks right")
	p.NotReloaded()
	p.Check("ticket-approved")
}

// TestAnswerFromNeedsMe: a blocking question an agent asks shows in Needs
// me, where it is answered; the flow resumes.
func TestAnswerFromNeedsMe(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Pick a format", "state": "ready"})
	run := w.Runner.MustLease()
	q := w.Runner.Ask(run, "YAML or TOML?", true)

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/needs-me")
	entry := `[data-testid="needs-me-entry"][data-kind="question"][data-item="ACME-1"]`
	p.WaitText(entry, "YAML or TOML?")
	p.Type(entry+` textarea`, "TOML")
	p.ClickButton(entry, "Answer")
	p.WaitJS(`!document.querySelector('`+entry+`')`, "the answered question to leave Needs me")
	p.Check("needs-me-answered")

	var qs struct {
		Questions []struct {
			ID     string
			Answer *string
		}
	}
	w.Admin(200, "GET", "/api/v1/items/ACME-1/questions", nil).JSON(t, &qs)
	for _, x := range qs.Questions {
		if x.ID == q && (x.Answer == nil || *x.Answer != "TOML") {
			t.Errorf("question %s: answer %v, want TOML", q, x.Answer)
		}
	}
}

// TestViewerSeesNoEditControls: a viewer reads the board and a ticket
// waiting for approval but gets none of the controls that write.
func TestViewerSeesNoEditControls(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Waiting", "state": "ready"})
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Later"})
	w.Runner.Complete(w.Runner.MustLease(), "done", "implemented")
	w.AwaitFlow("ACME-1", "the approval", func(f Flow) bool { return f.Waiting == "approval" })
	viewer := w.RoleToken(w.OrgID, "viewer")

	p := NewPage(t, w.URL)
	p.SignIn(viewer, "/projects/ACME")
	p.WaitJS(`document.querySelector('[data-key="ACME-2"]')`, "the viewer's board")
	if n := p.Count(`details.create`); n != 0 {
		t.Errorf("a viewer sees the create form")
	}
	if p.HasButton(`[data-key="ACME-2"]`, "Move ACME-2 to ready") {
		t.Errorf("a viewer sees Move to ready")
	}
	p.Open("/items/ACME-1")
	p.WaitText(`[data-testid="flow-status"]`, "waits for approval")
	for _, b := range []string{"Approve", "Reject"} {
		if p.HasButton("", b) {
			t.Errorf("a viewer sees %s", b)
		}
	}
	if n := p.Count(`textarea, input:not([type=hidden])`); n != 0 {
		t.Errorf("a viewer sees %d fields on a ticket", n)
	}
	p.Open("/projects/ACME/pipelines")
	p.WaitJS(`document.querySelector('[data-testid="stages[1].id"]')?.textContent === "approve"`, "the pipeline, read only")
	for _, b := range []string{"Publish", "Add stage"} {
		if p.HasButton("", b) {
			t.Errorf("a viewer sees %s on the pipelines page", b)
		}
	}
	if n := p.Count(`main textarea, main input:not([type=hidden])`); n != 0 {
		t.Errorf("a viewer sees %d fields on the pipelines page", n)
	}
	p.Open("/projects/ACME/settings")
	for _, b := range []string{"Save settings", "Pause project"} {
		if p.HasButton("", b) {
			t.Errorf("a viewer sees %s in the settings", b)
		}
	}
}

// TestCrossOriginWriteChangesNothing: a page served by another origin on
// 127.0.0.1 posts to Core with the signed-in browser's cookie, the way a
// CSRF attack does (a form and a no-cors fetch: no preflight); Core refuses
// both and nothing changes. The same request from Core's own origin goes
// through, so the attack's shape would have worked without the check.
func TestCrossOriginWriteChangesNothing(t *testing.T) {
	w := NewWorld(t)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/needs-me")

	body := func(title string) string { return `{"type":"task","title":"` + title + `"}` }
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(rw, `<!doctype html><html lang="en"><head><title>Prize</title></head><body><main><h1>You won</h1>
<iframe name="sink" title="sink"></iframe>
<form id="f" method="POST" action="%[1]s/api/v1/projects/ACME/items" enctype="text/plain" target="sink">
<input type="hidden" name='%[2]s' value='"}'></form>
<script>
window.formDone = new Promise(res => document.querySelector("iframe").addEventListener("load", () => res(true), {once: true}));
document.getElementById("f").submit();
window.fetchDone = fetch("%[1]s/api/v1/projects/ACME/items", {method: "POST", mode: "no-cors", credentials: "include",
	headers: {"Content-Type": "text/plain"}, body: %[3]q}).then(() => true, () => true);
</script></main></body></html>`, w.URL, strings.TrimSuffix(body("by form"), `"}`), body("by fetch"))
	}))
	t.Cleanup(evil.Close)

	// text/plain form encoding sends name=value: {"type":"task","title":"by form="}.
	// Both requests were answered before we look: the frame loaded the
	// answer and the fetch settled.
	p.AllowConsole(`status of 403`)
	// The form's answer is an API answer, which no page may frame
	// (frame-ancestors 'none', docs/security.md): the browser says so.
	p.AllowConsole(`violates the following Content Security Policy directive: "frame-ancestors 'none'"`)
	p.Do(navigate(evil.URL + "/"))
	if !Eval[bool](p, `Promise.all([window.formDone, window.fetchDone]).then(() => true)`) {
		t.Fatal("the cross-origin requests did not complete")
	}
	var items struct{ Items []struct{ Title string } }
	w.Admin(200, "GET", "/api/v1/projects/ACME/items", nil).JSON(t, &items)
	if len(items.Items) != 0 {
		t.Fatalf("a cross-origin write went through: %+v", items.Items)
	}

	// The same no-cors request from Core's own page, with the same cookie.
	p.Do(navigate(w.URL + "/needs-me"))
	p.WaitReady()
	if st := Eval[int](p, `fetch("/api/v1/projects/ACME/items", {method: "POST", headers: {"Content-Type": "text/plain"}, body: `+jsString(body("same origin"))+`}).then(r => r.status)`); st != 201 {
		t.Fatalf("the same write from Core's own origin: %d, want 201", st)
	}
}

// TestEveryPage opens each page of the UI as the platform admin, so that
// each passes the checks (console, axe-core, keyboard) and has its
// screenshot, including the ones no other scenario visits.
func TestEveryPage(t *testing.T) {
	w := NewWorld(t)
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "epic", "title": "Config"})
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Parse it", "epic": "ACME-1", "state": "ready"})
	w.Runner.Complete(w.Runner.MustLease(), "done", "implemented")
	w.AwaitFlow("ACME-2", "the approval", func(f Flow) bool { return f.Waiting == "approval" })

	p := NewPage(t, w.URL)
	p.Open("/signin")
	p.SignIn(apitest.BootstrapToken, "/needs-me")
	for _, path := range []string{"/orgs", "/projects/ACME", "/projects/ACME/pipelines", "/projects/ACME/settings",
		"/items/ACME-1", "/items/ACME-2", "/platform", "/runners", "/orgs/acme/settings"} {
		p.Open(path)
	}
}

// heldSocketsJS wraps the page's WebSocket so that a test can drop the
// connection (window.__uitestSockets) and keep it down while
// window.__uitestHold is set: a new connection then goes to a path that
// is no WebSocket and fails (counted in window.__uitestHeld), as when Core
// is unreachable.
const heldSocketsJS = `(() => {
	const Real = window.WebSocket;
	window.__uitestSockets = []; window.__uitestHeld = 0; window.__uitestHold = false;
	window.WebSocket = class extends Real {
		constructor(url, ...rest) {
			if (window.__uitestHold) { window.__uitestHeld++; url = "ws://" + location.host + "/uitest-held"; }
			super(url, ...rest);
			window.__uitestSockets.push(this);
		}
	};
})()`

// TestLiveResume: the ticket page loses its realtime connection; an event
// committed while it is down shows once it is back (the subscription
// resumes after the last seq seen), without a reload.
func TestLiveResume(t *testing.T) {
	w := NewWorld(t)
	var it struct{ Version int64 }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Before the drop"}).JSON(t, &it)
	p := NewPage(t, w.URL)
	p.BeforeScripts(heldSocketsJS)
	p.SignIn(apitest.BootstrapToken, "/items/ACME-1")
	p.WaitJS(`window.__uitestSockets.some(s => s.readyState === WebSocket.OPEN)`, "the realtime connection")
	p.NoReloadMark()

	p.AllowConsole(`WebSocket connection to 'ws://127\.0\.0\.1:\d+/uitest-held' failed`)
	Eval[bool](p, `(window.__uitestHold = true, window.__uitestSockets.forEach(s => s.close()), true)`)
	p.WaitJS(`window.__uitestHeld > 0`, "the page to try again while Core is unreachable")
	w.Admin(200, "PATCH", "/api/v1/items/ACME-1", map[string]any{"version": it.Version, "title": "During the drop"})
	var evs struct {
		LastSeq int64 `json:"last_seq"`
	}
	w.Admin(200, "GET", "/api/v1/items/ACME-1/events", nil).JSON(t, &evs)
	if p.Count(`[data-testid="timeline"]`) != 1 || Eval[int64](p, `Number(document.querySelector('[data-testid="timeline"]').dataset.lastSeq)`) >= evs.LastSeq {
		t.Fatal("the page saw the event while it was disconnected")
	}

	Eval[bool](p, `(window.__uitestHold = false, true)`)
	p.WaitJS(fmt.Sprintf(`Number(document.querySelector('[data-testid="timeline"]').dataset.lastSeq) >= %d`, evs.LastSeq),
		"the event committed during the drop in the timeline")
	p.WaitText(`h1`, "During the drop")
	p.NotReloaded()
	p.Check("ticket-after-resume")
}

// TestEscalationAndSubscription: an approval and a blocking question that
// waited longer than escalate_after (1ms here) show as escalated on their
// ticket pages, live; the Subscribe button subscribes the person signed in,
// and unsubscribes them.
func TestEscalationAndSubscription(t *testing.T) {
	w := NewWorld(t, func(c *config.Config) { c.Notify.EscalateAfter.Duration = time.Millisecond })
	w.Publish("default", approvalPipeline, 0)
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Waits long", "state": "ready"})
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Asks"})
	w.Runner.Complete(w.Runner.MustLease(), "done", "implemented")
	w.AwaitFlow("ACME-1", "the approval", func(f Flow) bool { return f.Waiting == "approval" })

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/items/ACME-1")
	p.WaitText(`[data-testid="flow-escalated"]`, "escalated to the project's admins")
	p.WaitText(`[data-testid="timeline"]`, "stage approve waited for an approval longer than 1ms")
	p.Check("ticket-approval-escalated")

	p.Open("/items/ACME-2")
	p.WaitText(`[data-testid="subscribe"]`, "Subscribe")
	w.Admin(201, "POST", "/api/v1/items/ACME-2/questions", map[string]any{"text": "Which port?", "blocking": true})
	p.WaitText(`[data-testid="question-escalated"]`, "escalated")
	p.Check("ticket-question-escalated")

	subscribed := func() bool {
		var s struct{ Subscribed bool }
		w.Admin(200, "GET", "/api/v1/items/ACME-2/subscription", nil).JSON(t, &s)
		return s.Subscribed
	}
	p.ClickButton(`.ticket-head`, "Subscribe")
	p.WaitText(`[data-testid="subscribe"]`, "Unsubscribe")
	if !subscribed() {
		t.Fatal("the Subscribe button did not subscribe")
	}
	p.ClickButton(`.ticket-head`, "Unsubscribe")
	p.WaitJS(`document.querySelector('[data-testid="subscribe"]').textContent === "Subscribe"`, "the button to say Subscribe again")
	if subscribed() {
		t.Fatal("the Unsubscribe button did not unsubscribe")
	}
}
