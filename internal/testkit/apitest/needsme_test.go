package apitest_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type needsMe struct {
	Items []struct {
		Kind, Org, Project, Item, Title, Detail, Stage string
		Since                                          time.Time
		Question                                       *struct{ ID, Text string }
	}
	Truncated bool
}

func (n needsMe) kinds() map[string]string {
	out := map[string]string{}
	for _, e := range n.Items {
		out[e.Kind+" "+e.Item] = e.Stage
	}
	return out
}

// flag flags key's active flow stuck, as the reconciler does (flow.Service.Flag).
func flag(t *testing.T, w *flowWorld, key string) {
	t.Helper()
	ctx := context.Background()
	it, err := w.Core.Tracker.FindItem(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := w.Core.Flows.List(ctx, it.ProjectID, flow.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.ItemID == it.ID && flow.Active(f.Status) {
			tr, err := w.Core.Flows.Flag(f, it, w.Core.Clock.Now(), "its step was lost")
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Core.Applier.Apply(ctx, tr); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s has no active flow", key)
}

// TestNeedsMe: every kind of wait shows up once for a person who may read
// its project, oldest first, with its organization, project, ticket and
// stage; a question with its text; a limit truncates; another
// organization's admin sees none of it, and a viewer of acme sees it all.
func TestNeedsMe(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{
				map[string]any{"id": "triage", "kind": "human"},
				map[string]any{"id": "fix", "kind": "agent", "instructions": "Fix it."},
			}}})
		start := func(key string) { w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil) }

		question := w.ticket("task")
		w.Admin(201, "POST", "/api/v1/items/"+question+"/questions", map[string]any{"text": "Which database?\nWe have two.", "blocking": true})
		w.Admin(201, "POST", "/api/v1/items/"+question+"/questions", map[string]any{"text": "Not blocking", "blocking": false})

		approval := w.ticket("bug")
		start(approval)
		w.await(approval, "approval", func(f flowView) bool { return f.Waiting == "approval" })

		merge := w.ticket("task")
		start(merge)
		w.runner.Complete(w.leaseStage(merge, "implement", 1), "done", "ok")
		w.runner.Complete(w.leaseStage(merge, "review", 1), "done", "ok")
		w.repo.PushBranch("ballet/" + merge)
		w.runner.Complete(w.leaseStage(merge, "verify", 1), "done", "ok")
		w.await(merge, "a human merge", func(f flowView) bool { return f.Waiting == "merge" })

		stuck := w.ticket("task")
		start(stuck)
		w.runner.Complete(w.leaseStage(stuck, "implement", 1), "done", "ok")
		w.await(stuck, "review's run", func(f flowView) bool { return f.Stage == "review" && f.Waiting == "run" })
		flag(t, w, stuck)

		noRunner := w.ticket("task")
		start(noRunner)
		w.await(noRunner, "its run", func(f flowView) bool { return f.Waiting == "run" })
		// The only runner drains: none could take the run.
		w.Must(200, w.runner.Token, "POST", "/api/v1/runners/"+w.runner.ID+"/heartbeat", map[string]any{"draining": true})

		budget := w.ticket("task")
		w.patchProject(map[string]any{"budgets": map[string]any{"per_day_usd": 0.015}}) // $0.04 spent today
		start(budget)
		w.await(budget, "budget", func(f flowView) bool { return f.Waiting == "budget" })

		// A second project, paused.
		w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "PAU", "name": "Paused",
			"repository": map[string]any{"forge": "git", "url": w.repo.Bare, "default_branch": "main"}})
		var p struct{ Version int64 }
		w.Admin(200, "GET", "/api/v1/projects/PAU", nil).JSON(t, &p)
		w.Admin(200, "PATCH", "/api/v1/projects/PAU", map[string]any{"version": p.Version, "paused": true})
		var it struct{ Key string }
		w.Admin(201, "POST", "/api/v1/projects/PAU/items", map[string]any{"type": "task", "title": "paused", "state": "ready"}).JSON(t, &it)
		paused := it.Key
		start(paused)
		w.await(paused, "pause", func(f flowView) bool { return f.Waiting == "pause" })

		// A third project, whose merges need an approval: its merge stage
		// waits for a review.
		w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "REV", "name": "Reviewed",
			"repository":   map[string]any{"forge": "git", "url": w.repo.Bare, "default_branch": "main"},
			"merge_policy": map[string]any{"mode": "manual", "required_approvals": 1}})
		w.Admin(200, "PUT", "/api/v1/projects/REV/pipelines/docs", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "integrate", "kind": "platform", "action": "merge"}}}})
		w.Admin(201, "POST", "/api/v1/projects/REV/items", map[string]any{"type": "docs", "title": "reviewed", "state": "ready"}).JSON(t, &it)
		review := it.Key
		w.repo.PushBranch("ballet/" + review)
		start(review)
		w.await(review, "a review", func(f flowView) bool { return f.Waiting == "review" })

		// Another organization: its question is its own.
		globex := w.Org("globex")
		w.Project("globex", "GLX")
		w.Admin(201, "POST", "/api/v1/projects/GLX/items", map[string]any{"type": "task", "title": "theirs"}).JSON(t, &it)
		theirs := it.Key
		w.Admin(201, "POST", "/api/v1/items/"+theirs+"/questions", map[string]any{"text": "Theirs?", "blocking": true})

		var acme struct{ ID string }
		w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &acme)
		viewer := w.RoleToken(acme.ID, "viewer")
		var got needsMe
		w.Must(200, viewer, "GET", "/api/v1/needs-me", nil).JSON(t, &got)
		want := map[string]string{
			"question " + question: "", "approval " + approval: "triage", "merge " + merge: "integrate",
			"stuck " + stuck: "review", "question " + stuck: "", "no_runner " + noRunner: "implement",
			"budget " + budget: "implement", "pause " + paused: "implement", "review " + review: "integrate",
		}
		if k := got.kinds(); !maps.Equal(k, want) || got.Truncated {
			t.Fatalf("needs-me of acme's viewer:\n got %v\nwant %v (truncated %v)", k, want, got.Truncated)
		}
		if !sort.SliceIsSorted(got.Items, func(i, j int) bool { return got.Items[i].Since.Before(got.Items[j].Since) }) {
			t.Fatal("needs-me is not oldest first")
		}
		for _, e := range got.Items {
			if e.Org != "acme" || e.Title == "" || e.Detail == "" || e.Since.IsZero() || (e.Kind == "question") != (e.Question != nil) {
				t.Fatalf("entry %+v", e)
			}
			if e.Item == question && (e.Question.Text != "Which database?\nWe have two." || !strings.HasPrefix(e.Detail, "Blocking question: Which database?")) {
				t.Fatalf("question entry %+v", e)
			}
			if wantProject, _, _ := strings.Cut(e.Item, "-"); e.Project != wantProject {
				t.Fatalf("entry %+v: project %s", e, wantProject)
			}
		}
		w.Must(200, viewer, "GET", "/api/v1/needs-me?limit=3", nil).JSON(t, &got)
		if len(got.Items) != 3 || !got.Truncated {
			t.Fatalf("limit 3: %d items, truncated %v", len(got.Items), got.Truncated)
		}
		w.Must(400, viewer, "GET", "/api/v1/needs-me?limit=0", nil)

		// A person with a role in project ACME alone (through a token it
		// made) sees ACME's entries only; a token scoped without
		// tracker.read sees nothing.
		w.Admin(200, "PUT", "/api/v1/projects/ACME/members/oidc|pam", map[string]any{"role": "member"})
		w.Must(200, w.TokenFor("oidc|pam", acme.ID, "member"), "GET", "/api/v1/needs-me", nil).JSON(t, &got)
		acmeOnly := 0
		for k := range want {
			if strings.Contains(k, " ACME-") {
				acmeOnly++
			}
		}
		for _, e := range got.Items {
			if e.Project != "ACME" {
				t.Fatalf("an ACME-only member sees %+v", e)
			}
		}
		if len(got.Items) != acmeOnly {
			t.Fatalf("an ACME-only member sees %d entries, want %d", len(got.Items), acmeOnly)
		}
		var scoped struct{ Token string }
		w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "writer", "organization": acme.ID, "role": "member",
			"scopes": []string{"tracker.write"}}).JSON(t, &scoped)
		w.Must(200, scoped.Token, "GET", "/api/v1/needs-me", nil).JSON(t, &got)
		if len(got.Items) != 0 {
			t.Fatalf("a token without tracker.read sees %d entries", len(got.Items))
		}

		// globex's admin sees only globex's question; the platform admin all.
		w.Must(200, w.RoleToken(globex, "admin"), "GET", "/api/v1/needs-me", nil).JSON(t, &got)
		if k := got.kinds(); !maps.Equal(k, map[string]string{"question " + theirs: ""}) {
			t.Fatalf("globex's admin: %v", k)
		}
		w.Admin(200, "GET", "/api/v1/needs-me", nil).JSON(t, &got)
		if len(got.Items) != len(want)+1 {
			t.Fatalf("the platform admin sees %d entries, want %d", len(got.Items), len(want)+1)
		}

		// Answering the stuck flow's question resumes it: no longer stuck;
		// the board's listing says the same, one request.
		var items struct {
			Items []struct {
				Key  string
				Flow *flow.Summary
			}
		}
		w.Must(200, viewer, "GET", "/api/v1/projects/ACME/items", nil).JSON(t, &items)
		byKey := map[string]*flow.Summary{}
		for _, i := range items.Items {
			byKey[i.Key] = i.Flow
		}
		if f := byKey[stuck]; f == nil || f.Attention != "stuck" || f.Waiting != "answer" || f.Stage != "review" {
			t.Fatalf("the board's stuck ticket: %+v", f)
		}
		if f := byKey[noRunner]; f == nil || f.Attention != "no_runner" || f.Status != "running" {
			t.Fatalf("the board's no_runner ticket: %+v", f)
		}
		if byKey[question] != nil {
			t.Fatalf("a ticket that never started has flow %+v", byKey[question])
		}
		var one struct {
			Key  string
			Flow *flow.Summary
		}
		w.Must(200, viewer, "GET", "/api/v1/items/"+merge, nil).JSON(t, &one)
		if one.Flow == nil || one.Flow.Stage != "integrate" || one.Flow.Waiting != "merge" || one.Flow.Status != "waiting" {
			t.Fatalf("GET /items/%s: flow %+v", merge, one.Flow)
		}
		w.answerOpen(stuck, "go on")
		w.await(stuck, "resumed", func(f flowView) bool { return f.Waiting != "answer" })
		w.Must(200, viewer, "GET", "/api/v1/needs-me", nil).JSON(t, &got)
		// (Resumed, it waits for budget now, as the project's day is spent.)
		if k := got.kinds(); slices.Contains(slices.Collect(maps.Keys(k)), "stuck "+stuck) || slices.Contains(slices.Collect(maps.Keys(k)), "question "+stuck) {
			t.Fatalf("the resumed flow is still stuck: %v", k)
		}
	})
}

// countingStore counts the reads made through it, but the event feed's
// (it tails the log all along, whatever the requests).
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (c *countingStore) Query(ctx context.Context, sql string, args ...any) (*store.Rows, error) {
	if !strings.Contains(sql, "FROM events WHERE") && !strings.Contains(sql, "MAX(seq)") {
		c.reads.Add(1)
	}
	return c.Store.Query(ctx, sql, args...)
}

// TestNeedsMeAndTheBoardReadInAFewQueries: GET /needs-me and a page of
// the board read the store a fixed number of times, however many entries
// and items they answer (no read per ticket).
func TestNeedsMeAndTheBoardReadInAFewQueries(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		cs := &countingStore{Store: s}
		e := apitest.New(t, cs)
		org := e.Org("acme")
		e.Project("acme", "ACME")
		viewer := e.RoleToken(org, "viewer")
		reads := func(path string) int64 {
			before := cs.reads.Load()
			e.Must(200, viewer, "GET", path, nil)
			return cs.reads.Load() - before
		}
		add := func(n int) {
			for range n {
				var it struct{ Key string }
				e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t"}).JSON(t, &it)
				e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "?", "blocking": true})
			}
		}
		add(1)
		needs, board := reads("/api/v1/needs-me"), reads("/api/v1/projects/ACME/items")
		add(20)
		if n := reads("/api/v1/needs-me"); n != needs {
			t.Errorf("needs-me: %d reads for 21 entries, %d for 1", n, needs)
		}
		if n := reads("/api/v1/projects/ACME/items"); n != board {
			t.Errorf("the board: %d reads for 21 items, %d for 1", n, board)
		}
		t.Logf("reads per request: needs-me %d, a board page %d (authentication and access checks included)", needs, board)
	})
}

// TestSessionsAreSharedByCoreInstances: a session started on one Core
// instance authenticates on another over the same database, and signing
// out on the second ends it on the first.
func TestSessionsAreSharedByCoreInstances(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		a, b := apitest.New(t, s), apitest.New(t, s)
		br := a.Browser("")
		br.SignIn(apitest.BootstrapToken)
		cookie := "ballet_session=" + br.Session()
		do := func(e *apitest.Env, method string) int {
			req, _ := http.NewRequest(method, e.URL+"/api/v1/session", nil)
			req.Header.Set("Cookie", cookie)
			req.Header.Set("Origin", e.URL)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if st := do(b, "GET"); st != 200 {
			t.Fatalf("the session on the second instance: %d", st)
		}
		// An instance whose bootstrap token is another (it was changed)
		// does not honour a session the old one started.
		rotated := apitest.New(t, s, func(c *config.Config) { c.Auth.BootstrapToken = "a-rotated-bootstrap-token-0123456789" })
		if st := do(rotated, "GET"); st != 401 {
			t.Fatalf("a session of the old bootstrap token after its change: %d", st)
		}
		if st := do(b, "DELETE"); st != 204 {
			t.Fatalf("sign-out on the second instance: %d", st)
		}
		if st := do(a, "GET"); st != 401 {
			t.Fatalf("the signed-out session on the first instance: %d", st)
		}
	})
}
