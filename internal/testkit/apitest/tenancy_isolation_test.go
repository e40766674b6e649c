package apitest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/knowledge/service"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// tenant is one of the two organizations of the isolation test, with a row
// in every table a read can reach: its marker is in every title, name and
// text it wrote, so that a row of it is recognisable in any answer.
type tenant struct {
	marker, slug, key   string
	orgID, projectID    string
	admin               string // an API token of an admin of the organization
	items               map[string]string
	itemIDs             []string
	question            string
	skill               string
	finished            apitest.LeasedRun // a run finished with usage
	live                apitest.LeasedRun // a running run (its token for MCP)
	inputTokens         int64
	entryIDs, tokenIDs  []string
	runner              string // the shared runner's id
	runIDs, questionIDs []string
	webhook, orgWebhook string // a project's and an organization's webhook (their URLs hold the marker)
}

// foreign lists what must never appear in an answer to the other tenant.
func (t *tenant) foreign() []string {
	out := []string{t.marker, t.slug, t.orgID, t.projectID, `"` + t.key + `"`, t.key + "-", t.question}
	out = append(out, t.itemIDs...)
	out = append(out, t.entryIDs...)
	out = append(out, t.tokenIDs...)
	out = append(out, t.runIDs...)
	out = append(out, t.webhook, t.orgWebhook)
	return append(out, t.questionIDs...)
}

// shows reports whether body shows a row of the tenant.
func (t *tenant) shows(body string) bool {
	return strings.Contains(body, t.marker) || strings.Contains(body, `"`+t.key+`"`) || strings.Contains(body, t.key+"-")
}

// leaks returns what of other's rows body shows.
func leaks(body string, other *tenant) []string {
	var out []string
	for _, f := range other.foreign() {
		if f != "" && strings.Contains(body, f) {
			out = append(out, f)
		}
	}
	return out
}

// tenancyRead is how the isolation test reads one GET route as a tenant.
type tenancyRead struct {
	// path is the request's path (and query) for the tenant.
	path func(t *tenant) string
	// token is the credential to read with (nil: the tenant's admin).
	token func(t *tenant) string
	// neutral, when set, says why the answer shows no row of any tenant
	// (so the tenant's own marker is not expected in it).
	neutral string
	// check, when set, asserts more of the answer (counts and sums).
	check func(t *testing.T, ten *tenant, body []byte)
}

func fixedPath(p string) func(*tenant) string { return func(*tenant) string { return p } }

// coreReads has an entry for every GET route of Core's route table:
// TestTenantsSeeNothingOfEachOther fails on a route without one, so a new
// list, search, history or count endpoint cannot go unchecked.
var coreReads = map[string]tenancyRead{
	"GET /api/v1/orgs":                       {path: fixedPath("/api/v1/orgs")},
	"GET /api/v1/orgs/{org}":                 {path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug }},
	"GET /api/v1/orgs/{org}/projects":        {path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug + "/projects" }},
	"GET /api/v1/orgs/{org}/members":         {path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug + "/members" }},
	"GET /api/v1/projects/{project}":         {path: func(t *tenant) string { return "/api/v1/projects/" + t.key }},
	"GET /api/v1/projects/{project}/items":   {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/items" }},
	"GET /api/v1/projects/{project}/events":  {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/events?limit=1000" }},
	"GET /api/v1/projects/{project}/members": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/members" }},
	"GET /api/v1/projects/{project}/permissions": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/permissions" },
		neutral: "the caller's own permissions in the project"},
	"GET /api/v1/projects/{project}/pipelines":        {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/pipelines" }},
	"GET /api/v1/projects/{project}/pipelines/{name}": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/pipelines/bug" }},
	"GET /api/v1/projects/{project}/pipelines/{name}/versions": {
		path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/pipelines/bug/versions" }},
	"GET /api/v1/projects/{project}/skills": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/skills" }},
	"GET /api/v1/projects/{project}/skills/{name}": {
		path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/skills/" + t.skill }},
	"GET /api/v1/projects/{project}/skills/{name}/versions": {
		path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/skills/" + t.skill + "/versions" }},
	"GET /api/v1/projects/{project}/flows": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/flows" }},
	"GET /api/v1/projects/{project}/budget": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/budget" },
		check: func(t *testing.T, ten *tenant, body []byte) {
			var b struct {
				Today struct {
					InputTokens int64 `json:"input_tokens"`
					Runs        int64 `json:"runs"`
				} `json:"today"`
			}
			if err := json.Unmarshal(body, &b); err != nil || b.Today.InputTokens != ten.inputTokens || b.Today.Runs != 1 {
				t.Errorf("%s's day spend counts %d input tokens over %d runs, want its own %d over 1 (%v)", ten.key,
					b.Today.InputTokens, b.Today.Runs, ten.inputTokens, err)
			}
		}},
	"GET /api/v1/items/{item}":              {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t1"] }},
	"GET /api/v1/items/{item}/questions":    {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t1"] + "/questions" }},
	"GET /api/v1/items/{item}/subscription": {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t1"] + "/subscription" }},
	"GET /api/v1/items/{item}/events":       {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t3"] + "/events?limit=1000" }},
	"GET /api/v1/items/{item}/flow":         {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t3"] + "/flow" }},
	"GET /api/v1/items/{item}/runs":         {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t3"] + "/runs" }},
	"GET /api/v1/items/{item}/budget": {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t3"] + "/budget" },
		check: func(t *testing.T, ten *tenant, body []byte) {
			var b struct {
				InputTokens int64 `json:"input_tokens"`
			}
			if err := json.Unmarshal(body, &b); err != nil || b.InputTokens != ten.inputTokens {
				t.Errorf("%s's ticket spend counts %d input tokens, want its own %d (%v)", ten.items["t3"], b.InputTokens, ten.inputTokens, err)
			}
		}},
	"GET /api/v1/runs/{run}":     {path: func(t *tenant) string { return "/api/v1/runs/" + t.finished.ID }},
	"GET /api/v1/runs/{run}/log": {path: func(t *tenant) string { return "/api/v1/runs/" + t.finished.ID + "/log" }},
	"GET /api/v1/runs/{run}/transcript": {path: func(t *tenant) string { return "/api/v1/runs/" + t.finished.ID + "/transcript" },
		neutral: "the run's log holds no CLI output to parse: an empty transcript, reached only through the tenant's own run"},
	"GET /api/v1/items/{item}/changes": {path: func(t *tenant) string { return "/api/v1/items/" + t.items["t1"] + "/changes" }},
	"GET /api/v1/runs/{run}/skills": {path: func(t *tenant) string { return "/api/v1/runs/" + t.live.ID + "/skills" },
		token: func(t *tenant) string { return t.live.Token }},
	"GET /api/v1/needs-me": {path: fixedPath("/api/v1/needs-me"),
		check: func(t *testing.T, ten *tenant, body []byte) {
			var l struct{ Items []struct{ Org string } }
			if err := json.Unmarshal(body, &l); err != nil || len(l.Items) == 0 {
				t.Errorf("%s's needs-me is empty: %s", ten.slug, body)
			}
		}},
	"GET /api/v1/me/notifications/inbox": {path: fixedPath("/api/v1/me/notifications/inbox"),
		check: func(t *testing.T, ten *tenant, body []byte) {
			var in struct{ Unread int64 }
			if err := json.Unmarshal(body, &in); err != nil || in.Unread < 1 {
				t.Errorf("%s's admin has %d unread notifications, want at least 1 (%v): %s", ten.slug, in.Unread, err, body)
			}
		}},
	"GET /api/v1/me/digest": {path: fixedPath("/api/v1/me/digest"),
		check: func(t *testing.T, ten *tenant, body []byte) {
			var d struct{ Needs int }
			if err := json.Unmarshal(body, &d); err != nil || d.Needs < 1 {
				t.Errorf("%s's digest lists %d needs, want at least 1 (%v): %s", ten.slug, d.Needs, err, body)
			}
		}},
	"GET /api/v1/tokens": {path: fixedPath("/api/v1/tokens"),
		neutral: "a token's own tokens: it has created none (only people do), so a lost filter shows the other's bot"},
	"GET /api/v1/session":  {path: fixedPath("/api/v1/session"), neutral: "the caller's own credential"},
	"GET /api/v1/platform": {path: fixedPath("/api/v1/platform"), neutral: "the platform's switches, no organization's"},
	"GET /api/v1/runners": {path: fixedPath("/api/v1/runners"),
		neutral: "runners are the platform's, shared by every organization: none is a tenant's row"},
	"GET /api/v1/orgs/{org}/events":        {path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug + "/events?limit=1000" }},
	"GET /api/v1/orgs/{org}/webhooks":      {path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug + "/webhooks" }},
	"GET /api/v1/orgs/{org}/webhooks/{id}": {path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug + "/webhooks/" + t.orgWebhook }},
	"GET /api/v1/orgs/{org}/webhooks/{id}/deliveries": {
		path: func(t *tenant) string { return "/api/v1/orgs/" + t.slug + "/webhooks/" + t.orgWebhook + "/deliveries" }},
	"GET /api/v1/projects/{project}/webhooks": {path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/webhooks" }},
	"GET /api/v1/projects/{project}/webhooks/{id}": {
		path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/webhooks/" + t.webhook }},
	"GET /api/v1/projects/{project}/webhooks/{id}/deliveries": {
		path: func(t *tenant) string { return "/api/v1/projects/" + t.key + "/webhooks/" + t.webhook + "/deliveries" }},
	"GET /api/v1/platform/events": {path: fixedPath("/api/v1/platform/events?limit=1000"),
		neutral: "the platform's history (its switches): no organization's row"},
	"GET /api/v1/runners/{runner}/events": {path: func(t *tenant) string { return "/api/v1/runners/" + t.runner + "/events?limit=1000" },
		token:   func(*tenant) string { return apitest.BootstrapToken },
		neutral: "the shared runner's history, read by the platform admin: the platform's, no organization's"},
	"GET /api/v1/tokens/{id}/events": {path: func(t *tenant) string { return "/api/v1/tokens/" + t.tokenIDs[0] + "/events?limit=1000" },
		token: func(*tenant) string { return apitest.BootstrapToken }},
}

// knowledgeReads has an entry for every GET route of the Knowledge
// service's route table (paths below service.Prefix), read through Core.
var knowledgeReads = map[string]tenancyRead{
	"GET /spaces":         {path: fixedPath("/spaces")},
	"GET /spaces/{space}": {path: fixedPath("/spaces/shared")},
	"GET /search":         {path: fixedPath("/search?q=deploy")},
	"GET /spaces/{space}/entries": {path: fixedPath("/spaces/default/entries?include_deleted=true"),
		check: func(t *testing.T, ten *tenant, body []byte) {
			var l struct{ Entries []struct{ Slug string } }
			if err := json.Unmarshal(body, &l); err != nil || len(l.Entries) != 2 {
				t.Errorf("%s's default space lists %s, want its own 2 entries", ten.slug, body)
			}
		}},
	"GET /spaces/{space}/entries/{slug}":          {path: fixedPath("/spaces/shared/entries/guides%2Fdeploy")},
	"GET /spaces/{space}/entries/{slug}/versions": {path: fixedPath("/spaces/default/entries/guides%2Fdeploy/versions")},
	"GET /spaces/{space}/entries/{slug}/diff":     {path: fixedPath("/spaces/default/entries/guides%2Fdeploy/diff?from=1&to=2")},
	"GET /spaces/{space}/entries/{slug}/history":  {path: fixedPath("/spaces/default/entries/guides%2Fdeploy/history")},
}

// mcpReads has an entry for every tool of Core's MCP server: its
// arguments, or "" for a tool that writes only to the token's own run.
var mcpReads = map[string]struct {
	args   func(other *tenant) map[string]any
	writes string
}{
	"get_ticket":       {args: func(*tenant) map[string]any { return nil }},
	"search_knowledge": {args: func(*tenant) map[string]any { return map[string]any{"query": "deploy"} }},
	"read_entry":       {args: func(*tenant) map[string]any { return map[string]any{"slug": "guides/deploy"} }},
	"submit_report":    {writes: "records the report of the token's own run"},
	"ask_question":     {writes: "asks on the token's own run's ticket"},
}

// tenancyWorld is a Core running its jobs with the real Knowledge service
// behind it, and a runner serving every organization.
type tenancyWorld struct {
	*apitest.Env
	ks     *service.Server
	runner *apitest.Runner
	leased map[string][]apitest.LeasedRun
}

func newTenancyWorld(t *testing.T, s store.Store) *tenancyWorld {
	var handler atomic.Pointer[http.Handler]
	kh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(kh.Close)
	dir := t.TempDir()
	e := apitest.New(t, s, func(c *config.Config) {
		c.Knowledge.URL = kh.URL
		c.Jobs.Poll.Duration = 20 * time.Millisecond
		c.Storage.Path = dir + "/core.db"
	})
	cfg := config.KnowledgeDefault()
	cfg.Knowledge.Core, cfg.Knowledge.ServiceToken = e.URL, apitest.ServiceToken
	srv, err := service.Open(t.Context(), service.Options{Config: cfg, Clock: clock.NewFake(time.Now()),
		Store: storetest.OpenWith(t, s.Engine(), knowledge.Migrations)})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	handler.Store(&h)
	e.StartJobs()
	return &tenancyWorld{Env: e, ks: srv, runner: e.NewRunner("shared-runner"), leased: map[string][]apitest.LeasedRun{}}
}

// leaseFor leases runs until one of the ticket's comes (others are kept:
// they are rows of their tenants all the same).
func (w *tenancyWorld) leaseFor(key string) apitest.LeasedRun {
	w.T.Helper()
	if rs := w.leased[key]; len(rs) > 0 {
		w.leased[key] = rs[1:]
		return rs[0]
	}
	for range 20 {
		r := w.runner.MustLease()
		if r.Item == key {
			return r
		}
		w.leased[r.Item] = append(w.leased[r.Item], r)
	}
	w.T.Fatalf("no run of %s leased", key)
	return apitest.LeasedRun{}
}

// seed writes a row of the tenant in everything a read can reach.
func (w *tenancyWorld) seed(ten *tenant) {
	t, m := w.T, ten.marker
	repo := apitest.NewGitRepo(t)
	ten.orgID = w.Org(ten.slug)
	ten.runner = w.runner.ID
	var p struct{ ID string }
	w.Admin(201, "POST", "/api/v1/orgs/"+ten.slug+"/projects", map[string]any{"key": ten.key, "name": "Project " + m,
		"repository": map[string]any{"forge": "git", "url": repo.Bare, "default_branch": "main"}}).JSON(t, &p)
	ten.projectID = p.ID
	w.Admin(200, "PUT", "/api/v1/orgs/"+ten.slug+"/members/"+m+"-admin", map[string]any{"role": "admin"})
	ten.admin = w.TokenFor(m+"-admin", ten.orgID, "admin")
	as := func(want int, method, path string, body any) *apitest.Response {
		t.Helper()
		return w.Must(want, ten.admin, method, path, body)
	}
	as(200, "PUT", "/api/v1/orgs/"+ten.slug+"/members/"+m+"-user", map[string]any{"role": "member"})
	as(200, "PUT", "/api/v1/projects/"+ten.key+"/members/"+m+"-user", map[string]any{"role": "viewer"})
	_, tok, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: m + "-admin"}, auth.KindAPI, m+" bot", ten.orgID, "member", nil, nil,
		w.Core.Clock.Now())
	if err := w.Core.Applier.Apply(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	ten.tokenIDs = append(ten.tokenIDs, tok.ID)

	ten.items = map[string]string{}
	for _, it := range []struct{ name, typ, state string }{{"epic", "epic", ""}, {"t1", "task", ""}, {"t2", "task", ""},
		{"t3", "task", "ready"}, {"t4", "task", "ready"}} {
		body := map[string]any{"type": it.typ, "title": it.name + " of " + m, "acceptance_criteria": "it works for " + m}
		if it.state != "" {
			body["state"] = it.state
		}
		var v struct{ ID, Key string }
		as(201, "POST", "/api/v1/projects/"+ten.key+"/items", body).JSON(t, &v)
		ten.items[it.name], ten.itemIDs = v.Key, append(ten.itemIDs, v.ID)
	}
	as(201, "POST", "/api/v1/items/"+ten.items["t2"]+"/blockers/"+ten.items["t1"], nil)
	// Webhooks of the project and of the organization (never delivered:
	// this world runs no jobs), which hear the blocking question below.
	var hk struct{ ID string }
	as(201, "POST", "/api/v1/projects/"+ten.key+"/webhooks", map[string]any{"url": "https://93.184.216.34/" + m, "events": []string{"*"}}).JSON(t, &hk)
	ten.webhook = hk.ID
	as(201, "POST", "/api/v1/orgs/"+ten.slug+"/webhooks", map[string]any{"url": "https://93.184.216.34/org-" + m, "events": []string{"*"}}).JSON(t, &hk)
	ten.orgWebhook = hk.ID
	var q struct{ ID string }
	as(201, "POST", "/api/v1/items/"+ten.items["t1"]+"/questions", map[string]any{"text": "Which way, " + m + "?", "blocking": true}).JSON(t, &q)
	ten.question, ten.questionIDs = q.ID, append(ten.questionIDs, q.ID)

	ten.skill = m + "-style"
	as(201, "POST", "/api/v1/projects/"+ten.key+"/skills", map[string]any{"name": ten.skill, "description": "style of " + m, "content": "write as " + m})
	as(200, "PUT", "/api/v1/projects/"+ten.key+"/skills/"+ten.skill, map[string]any{"version": 1, "content": "write as " + m + ", v2"})
	as(200, "PUT", "/api/v1/projects/"+ten.key+"/pipelines/bug", map[string]any{"version": 0,
		"definition": map[string]any{"stages": []any{map[string]any{"id": m + "-work", "kind": "agent"}}}})

	// A run finished with usage (its log, report and question), and a
	// running one whose token the MCP tools act with.
	as(200, "POST", "/api/v1/items/"+ten.items["t3"]+"/flow/start", nil)
	r := w.leaseFor(ten.items["t3"])
	ten.finished, ten.runIDs = r, append(ten.runIDs, r.ID)
	if resp := w.Raw(w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/log?offset=0", octets, []byte("log line of "+m+"\n")); resp.Status != 200 {
		t.Fatalf("log: %d %s", resp.Status, resp.Body)
	}
	ten.questionIDs = append(ten.questionIDs, w.runner.Ask(r, "Fine for "+m+"?", false))
	w.Must(200, r.Token, "POST", "/api/v1/runs/"+r.ID+"/report", map[string]any{"outcome": "done", "summary": "done for " + m})
	w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/finish", map[string]any{"exit_status": 0,
		"usage": map[string]any{"input_tokens": ten.inputTokens, "output_tokens": 7, "cost_usd": 0.25}})
	as(200, "POST", "/api/v1/items/"+ten.items["t4"]+"/flow/start", nil)
	ten.live = w.leaseFor(ten.items["t4"])
	ten.runIDs = append(ten.runIDs, ten.live.ID)

	// Knowledge: the same space and entry slugs in both organizations.
	k := "/api/v1/knowledge/orgs/" + ten.slug
	as(201, "POST", k+"/spaces", map[string]any{"slug": "shared", "title": "Shared of " + m})
	entry := func(space, slug string) {
		var e struct{ ID string }
		as(201, "POST", k+"/spaces/"+space+"/entries", map[string]any{"slug": slug, "title": "Deploying, " + m,
			"body": "How " + m + " deploys.", "tags": []string{"ops"}}).JSON(t, &e)
		ten.entryIDs = append(ten.entryIDs, e.ID)
	}
	entry("default", "guides/deploy")
	entry("default", m+"-only")
	entry("shared", "guides/deploy")
	as(200, "PUT", k+"/spaces/default/entries/guides%2Fdeploy", map[string]any{"version": 1, "title": "Deploying, " + m,
		"body": "How " + m + " deploys, then tells the channel.", "tags": []string{"ops"}})
	as(200, "DELETE", k+"/spaces/default/entries/"+m+"-only", nil)
}

// TestTenantsSeeNothingOfEachOther: two organizations with a row in
// everything (members, overrides, tokens, items, blockers, questions,
// skills, pipelines, flows, runs, logs, spend, spaces, entries, versions),
// on both engines. For every GET route of Core's and the Knowledge
// service's route tables (a route with no entry here fails the test), for
// every MCP tool and for every realtime stream, each organization's admin
// sees its own rows and none of the other's; counts and sums count only
// its own.
func TestTenantsSeeNothingOfEachOther(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newTenancyWorld(t, s)
		a := &tenant{marker: "zqalfa", slug: "zqalfa-org", key: "ALF", inputTokens: 1111}
		b := &tenant{marker: "zqbravo", slug: "zqbravo-org", key: "BRV", inputTokens: 2222}
		w.seed(a)
		w.seed(b)
		// Each tenant's admin hears of a blocking question on their ticket.
		for _, ten := range []*tenant{a, b} {
			var q struct{ ID string }
			w.Admin(201, "POST", "/api/v1/items/"+ten.items["t1"]+"/questions", map[string]any{"text": "Blocked, " + ten.marker + "?",
				"blocking": true}).JSON(t, &q)
			ten.questionIDs = append(ten.questionIDs, q.ID)
		}
		if _, err := w.Core.Notifier.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Core.Webhooks.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}

		read := func(t *testing.T, route string, rd tenancyRead, prefix func(*tenant) string) {
			for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
				own, other := pair[0], pair[1]
				token := own.admin
				if rd.token != nil {
					token = rd.token(own)
				}
				r := w.Do(token, "GET", prefix(own)+rd.path(own), nil)
				body := string(r.Body)
				if r.Status != 200 {
					t.Errorf("%s as %s: %d %s", route, own.slug, r.Status, body)
					continue
				}
				if l := leaks(body, other); len(l) > 0 {
					t.Errorf("%s as %s shows %s's %q: %s", route, own.slug, other.slug, l, body)
				}
				if rd.neutral == "" && !own.shows(body) {
					t.Errorf("%s as %s shows none of its own rows (the check would prove nothing): %s", route, own.slug, body)
				}
				if rd.check != nil {
					rd.check(t, own, r.Body)
				}
			}
		}
		t.Run("core", func(t *testing.T) {
			seen := map[string]bool{}
			for _, rt := range w.Core.API.Routes() {
				if rt.Method != "GET" {
					continue
				}
				name := rt.Method + " " + rt.Path
				seen[name] = true
				rd, ok := coreReads[name]
				if !ok {
					t.Errorf("%s has no tenancy check: add it to coreReads (a path, and what it must show)", name)
					continue
				}
				read(t, name, rd, func(*tenant) string { return "" })
			}
			for name := range coreReads {
				if !seen[name] {
					t.Errorf("coreReads has %s, which is no GET route of Core's", name)
				}
			}
		})
		t.Run("knowledge", func(t *testing.T) {
			seen := map[string]bool{}
			for _, rt := range w.ks.API.Routes() {
				if rt.Method != "GET" {
					continue
				}
				name := rt.Method + " " + rt.Path
				seen[name] = true
				rd, ok := knowledgeReads[name]
				if !ok {
					t.Errorf("%s has no tenancy check: add it to knowledgeReads", name)
					continue
				}
				read(t, name, rd, func(ten *tenant) string { return "/api/v1/knowledge/orgs/" + ten.slug })
			}
			for name := range knowledgeReads {
				if !seen[name] {
					t.Errorf("knowledgeReads has %s, which is no GET route of the Knowledge service's", name)
				}
			}
			// The other organization's entry, by a slug only it has, and its
			// whole space: not found, as a slug nobody has.
			for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
				own, other := pair[0], pair[1]
				k := "/api/v1/knowledge/orgs/" + own.slug
				w.Must(404, own.admin, "GET", k+"/spaces/default/entries/"+other.marker+"-only", nil)
				w.Must(404, own.admin, "GET", "/api/v1/knowledge/orgs/"+other.slug+"/spaces", nil)
			}
		})
		t.Run("mcp", func(t *testing.T) {
			for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
				own, other := pair[0], pair[1]
				sess, err := connectMCP(t, w.Env, own.live.Token)
				if err != nil {
					t.Fatal(err)
				}
				tools, err := sess.ListTools(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, tool := range tools.Tools {
					rd, ok := mcpReads[tool.Name]
					switch {
					case !ok:
						t.Errorf("MCP tool %s has no tenancy check: add it to mcpReads", tool.Name)
						continue
					case rd.writes != "":
						continue
					}
					text, isErr := call(t, sess, tool.Name, rd.args(other))
					if isErr {
						t.Errorf("%s as %s's run: %s", tool.Name, own.slug, text)
					}
					if l := leaks(text, other); len(l) > 0 {
						t.Errorf("%s as %s's run shows %s's %q: %s", tool.Name, own.slug, other.slug, l, text)
					}
					if !strings.Contains(text, own.marker) {
						t.Errorf("%s as %s's run shows none of its own: %s", tool.Name, own.slug, text)
					}
				}
				if text, isErr := call(t, sess, "read_entry", map[string]any{"slug": other.marker + "-only"}); !isErr {
					t.Errorf("read_entry of %s's entry as %s's run: %s", other.slug, own.slug, text)
				}
			}
		})
		t.Run("realtime", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
			defer cancel()
			type stream struct {
				own  *tenant
				name string
				sub  *realtime.Subscription
			}
			var streams []stream
			for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
				own, other := pair[0], pair[1]
				c, err := realtime.Dial(ctx, w.URL, own.admin, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				for _, name := range []string{"org:" + own.slug, "project:" + own.key, "item:" + own.items["t1"]} {
					sub, err := c.Subscribe(ctx, name, 0)
					if err != nil {
						t.Fatalf("%s subscribes to %s: %v", own.slug, name, err)
					}
					streams = append(streams, stream{own, name, sub})
				}
				for _, name := range []string{"org:" + other.slug, "project:" + other.key, "item:" + other.items["t1"],
					"org:" + other.orgID, "project:" + other.projectID, "item:" + other.itemIDs[1]} {
					if _, err := c.Subscribe(ctx, name, 0); !realtime.IsForbidden(err) {
						t.Errorf("%s subscribes to %s's %s: %v, want forbidden", own.slug, other.slug, name, err)
					}
				}
			}
			// Live events of both, then each one's sentinel: a stream has
			// seen every earlier event of the log by its sentinel.
			for _, ten := range []*tenant{b, a, b} {
				w.Must(201, ten.admin, "POST", "/api/v1/items/"+ten.items["t1"]+"/questions",
					map[string]any{"text": "sentinel of " + ten.marker, "blocking": false})
			}
			for _, st := range streams {
				other := a
				if st.own == a {
					other = b
				}
				n := 0
				for done := false; !done; n++ {
					ev := apitest.Receive(t, st.sub.C(), st.name+"'s events")
					j, err := json.Marshal(ev)
					if err != nil {
						t.Fatal(err)
					}
					if l := leaks(string(j), other); len(l) > 0 {
						t.Errorf("stream %s of %s delivers %s's %q: %s", st.name, st.own.slug, other.slug, l, j)
					}
					done = strings.Contains(string(j), "sentinel of "+st.own.marker)
				}
				if n < 3 {
					t.Errorf("stream %s delivered only %d events before its sentinel", st.name, n)
				}
			}
		})
	})
}
