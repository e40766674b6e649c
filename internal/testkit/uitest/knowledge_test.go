package uitest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/service"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// knowledgeToken is the service credential Core and the test's Knowledge
// service share.
const knowledgeToken = "uitest-knowledge-service-credential-0123456789"

// NewKnowledgeWorld is NewWorld with a Knowledge service beside Core on
// 127.0.0.1 (its own SQLite file), which Core proxies /api/v1/knowledge to
// and which resolves callers through Core's introspection endpoint.
func NewKnowledgeWorld(t testing.TB) *World {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the service's address, before Core needs it
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorld(t, func(c *config.Config) {
		c.Knowledge.URL = "http://" + ln.Addr().String()
		c.Knowledge.ServiceToken = knowledgeToken
	})
	kc := config.KnowledgeDefault()
	kc.Knowledge.Core = w.URL
	kc.Knowledge.ServiceToken = knowledgeToken
	srv, err := service.Open(t.Context(), service.Options{Config: kc, Store: storetest.OpenWith(t, "sqlite", knowledge.Migrations)})
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: srv.Handler()}}
	hs.Start()
	t.Cleanup(hs.Close)
	return w
}

// TestKnowledge: in the Knowledge page an entry is created (its Markdown
// rendered and sanitised), edited with the preview, its change seen as a
// diff in History, version 1 restored as version 3; a save that someone
// else's beat is refused with their version offered; a search finds it with
// the hit marked — nothing but <mark> of the snippet is markup.
func TestKnowledge(t *testing.T) {
	w := NewKnowledgeWorld(t)
	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/orgs/acme/knowledge/default")
	p.WaitText("h1", "Space Default")
	p.Check("knowledge-space")

	p.ClickButton("", "New entry")
	p.WaitReady()
	p.Type(`input[name="slug"]`, "ops/deploys")
	p.Type(`input[name="title"]`, "Deploying")
	p.Type(`input[name="tags"]`, "ops, release")
	p.Type(`textarea[name="body"]`, "# Deploys\n\nRun `make deploy` after the **review**.\n\n<img alt=\"a diagram\" src=\"data:,\" onerror=\"document.title='pwned'\">")
	p.WaitText(".kn-preview strong", "review")
	p.Check("knowledge-new-entry")
	p.ClickButton("form", "Create entry")
	p.WaitJS(`location.pathname === "/orgs/acme/knowledge/default/ops%2Fdeploys" && document.body.dataset.ready === "1"`, "the new entry's page")
	p.WaitText(`[data-testid="entry-version"]`, "1")
	if got := p.Text(".kn-markdown code"); got != "make deploy" {
		t.Errorf("the rendered Markdown's code: %q, want make deploy", got)
	}
	if n := p.Count(".kn-markdown [onerror], .kn-markdown script"); n != 0 {
		t.Errorf("%d elements with a script or an event handler survived the sanitiser", n)
	}
	if got := p.Text(".kn-markdown"); !strings.Contains(got, `<img alt="a diagram"`) {
		t.Errorf("the HTML typed into the body should show as text; the rendered entry reads %q", got)
	}
	p.Check("knowledge-entry")

	p.ClickButton(".actions", "Edit")
	p.WaitReady()
	p.Type(`textarea[name="body"]`, "# Deploys\n\nRun `make deploy` after the **review** and a green CI.")
	p.Type(`input[name="note"]`, "mention CI")
	p.WaitText(".kn-preview", "green CI")
	p.Check("knowledge-edit")
	p.ClickButton("form", "Save")
	p.WaitJS(`location.search === "" && document.querySelector('[data-testid="entry-version"]')?.textContent === "2"`, "version 2 saved")

	p.ClickButton(".actions", "History")
	p.WaitJS(`document.querySelectorAll('[data-testid="history"] tbody tr').length === 2`, "two versions in History")
	if first := Eval[string](p, `document.querySelector('[data-testid="history"] tbody tr').dataset.version`); first != "2" {
		t.Errorf("History's first row is version %s, want the newest (2)", first)
	}
	p.ClickButton(`[data-testid="history"]`, "Show changes")
	p.WaitJS(`document.querySelector('[data-testid="diff"]')`, "the diff")
	added := Eval[[]string](p, `[...document.querySelectorAll('[data-kind="add"]')].map(e => e.textContent)`)
	removed := Eval[[]string](p, `[...document.querySelectorAll('[data-kind="del"]')].map(e => e.textContent)`)
	if !strings.Contains(strings.Join(added, "\n"), "green CI") || !strings.Contains(strings.Join(removed, "\n"), "**review**.") {
		t.Errorf("the diff from 1 to 2: added %q, removed %q", added, removed)
	}
	p.Check("knowledge-history")

	p.ClickButton(`[data-testid="history"]`, "Restore version 1")
	p.WaitJS(`document.querySelector('[data-testid="entry-version"]')?.textContent === "3" &&
		document.querySelectorAll('[data-testid="history"] tbody tr').length === 3`, "version 1 restored as version 3")
	p.WaitText(`[data-testid="history"] [role="status"]`, "Restored version 1 as version 3.")

	// Someone saves while this page edits: Save is refused, their version
	// offered and loaded, then saved upon.
	p.AllowConsole(`status of 409`) // the refused save, as the browser logs it
	p.Open("/orgs/acme/knowledge/default/ops%2Fdeploys?edit")
	p.Type(`textarea[name="body"]`, "My text.")
	w.Admin(200, "PUT", "/api/v1/knowledge/orgs/acme/spaces/default/entries/ops%2Fdeploys", map[string]any{"version": 3,
		"title": "Deploying", "tags": []string{"ops", "release"}, "body": "Run `make deploy` <b>after</b> the review."})
	p.ClickButton("form", "Save")
	p.WaitText(`[role="alert"]`, "Someone saved this entry meanwhile: version 4")
	p.Check("knowledge-conflict")
	p.ClickButton(`[role="alert"]`, "Load their version")
	p.WaitJS(`document.querySelector('[data-testid="based-on"]').textContent === "4" &&
		document.querySelector('textarea[name="body"]').value.includes("<b>after</b>")`, "their version loaded")
	p.WaitText(".kn-mine pre", "My text.")
	p.Type(`textarea[name="body"]`, "Run `make deploy` <b>after</b> the review. My text.")
	p.ClickButton("form", "Save")
	p.WaitJS(`location.search === "" && document.querySelector('[data-testid="entry-version"]')?.textContent === "5"`, "version 5 saved upon theirs")

	p.Open("/orgs/acme/knowledge?q=review&tag=ops")
	p.WaitJS(`document.querySelector('[data-testid="search-results"] li')`, "a search result")
	if got := p.Text(`[data-testid="search-results"] li a`); got != "Deploying" {
		t.Errorf("the search's first result: %q, want Deploying", got)
	}
	if marks := Eval[[]string](p, `[...document.querySelectorAll(".kn-snippet mark")].map(m => m.textContent.toLowerCase())`); len(marks) == 0 || marks[0] != "review" {
		t.Errorf("the snippet's marks: %q, want the hit review marked", marks)
	}
	if n := p.Count(".kn-snippet *:not(mark)"); n != 0 || !strings.Contains(p.Text(".kn-snippet"), "<b>after</b>") {
		t.Errorf("the snippet %q has %d elements besides <mark>; the entry's <b> must read as text", p.Text(".kn-snippet"), n)
	}
	p.Check("knowledge-search")
	if title := Eval[string](p, `document.title`); strings.Contains(title, "pwned") {
		t.Errorf("a script from an entry ran: document.title = %q", title)
	}
}
