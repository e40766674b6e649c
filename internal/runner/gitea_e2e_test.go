//go:build linux

package runner_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

// End to end on a real Gitea: a whole Core (apitest.RunOn), the real
// runner with real claude-code sessions against the fake model, in the
// real sandbox, and a real Gitea 1.26 (internal/testkit/giteatest) holding each
// project's repository. Ballet reaches Gitea — Core's forge client and the
// runner's git — through forgeCalls, a proxy that counts its API calls; the
// test plays CI and people on Gitea directly.

// forgeCalls is a reverse proxy to Gitea that records every API call
// passing through it (Ballet's), by repository.
type forgeCalls struct {
	URL string
	mu  sync.Mutex
	log []forgeCall
}

// forgeCall is one API call Ballet made.
type forgeCall struct {
	Method, Path string
	Repo         string    // owner/name, "" for calls outside /repos/
	Do           string    // a merge call's "Do": "merge", or "manually-merged" (marking a pull request whose head is already in its base)
	At           time.Time // on Core's clock
	Real         time.Time // on the wall clock
}

var repoPathRE = regexp.MustCompile(`^/api/v1/repos/([^/]+/[^/]+)`)

func newForgeCalls(t testing.TB, target string, now func() time.Time) *forgeCalls {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	fc := &forgeCalls{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			c := forgeCall{Method: r.Method, Path: r.URL.Path, At: now(), Real: time.Now()}
			if m := repoPathRE.FindStringSubmatch(r.URL.Path); m != nil {
				c.Repo = m[1]
			}
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/merge") && r.Body != nil {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var opt struct{ Do string }
				_ = json.Unmarshal(body, &opt)
				c.Do = opt.Do
			}
			fc.mu.Lock()
			fc.log = append(fc.log, c)
			fc.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fc.URL = srv.URL
	return fc
}

// of returns the API calls made on repo (owner/name) so far.
func (fc *forgeCalls) of(repo string) []forgeCall {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []forgeCall
	for _, c := range fc.log {
		if c.Repo == repo {
			out = append(out, c)
		}
	}
	return out
}

// count counts repo's API calls whose "METHOD path" (path relative to
// /api/v1/repos/owner/name) matches re.
func (fc *forgeCalls) count(repo string, re *regexp.Regexp) int {
	n := 0
	for _, c := range fc.of(repo) {
		if re.MatchString(c.Method + " " + strings.TrimPrefix(c.Path, "/api/v1/repos/"+repo)) {
			n++
		}
	}
	return n
}

// giteaSide is the Gitea of a test: the server of the test package, the
// proxy Ballet reaches it through, user ballet who owns the repositories
// and is Ballet's credential (in Core's environment under credEnv), and
// user reviewer, a collaborator who reviews.
type giteaSide struct {
	gitea    *giteatest.Server
	calls    *forgeCalls
	ballet   giteatest.User
	reviewer giteatest.User
	credEnv  string
}

// newGiteaSide starts the proxy in front of the test package's Gitea and
// seeds the two users; now stamps the calls (Core's clock).
func newGiteaSide(t testing.TB, now func() time.Time) giteaSide {
	t.Helper()
	g := giteatest.Shared(t)
	s := giteaSide{gitea: g, calls: newForgeCalls(t, g.URL, now)}
	s.ballet = g.CreateUser(t, "ballet")
	s.reviewer = g.CreateUser(t, "reviewer")
	// Core resolves credentials_ref env:NAME from its own environment.
	s.credEnv = coreEnv(t, "GITEA", s.ballet.Name+":"+s.ballet.Token)
	return s
}

// coreEnv sets a variable of Core's environment (the process's: t.Setenv
// refuses parallel tests) under a name of this test's own, until the test
// ends, and returns the name.
func coreEnv(t testing.TB, what, value string) string {
	t.Helper()
	name := "ACME_E2E_" + what + "_" + strings.ToUpper(unique())
	if err := os.Setenv(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(name) })
	return name
}

// giteaWorld is a coreWorld (Core, runner, fake model) with a real Gitea.
type giteaWorld struct {
	*coreWorld
	giteaSide
}

func newGiteaWorld(t *testing.T) *giteaWorld {
	t.Helper()
	return &giteaWorld{coreWorld: newCoreWorld(t, nil), giteaSide: newGiteaSide(t, time.Now)}
}

// in returns the world for subtest t: its helpers fail t.
func (w *giteaWorld) in(t *testing.T) *giteaWorld {
	return &giteaWorld{coreWorld: w.coreWorld.in(t), giteaSide: w.giteaSide}
}

func unique() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// giteaProject is a Ballet project whose repository is on Gitea.
type giteaProject struct {
	e    *apitest.Env
	s    giteaSide
	t    testing.TB
	Key  string
	Repo *giteatest.Repo
}

// project creates a repository on Gitea (owned by ballet, reviewer a
// collaborator with write access) and the Ballet project key of
// organization acme on it, reached through the proxy, with policy as its
// merge policy; more are further repository settings.
func (s giteaSide) project(t testing.TB, e *apitest.Env, key string, policy map[string]any, more ...map[string]any) *giteaProject {
	t.Helper()
	repo := s.gitea.CreateRepo(t, s.ballet)
	s.gitea.AddCollaborator(t, repo, s.reviewer)
	settings := map[string]any{"forge": "gitea", "url": s.calls.URL + "/" + repo.FullName() + ".git", "default_branch": "main",
		"credentials_ref": "env:" + s.credEnv}
	for _, m := range more {
		maps.Copy(settings, m)
	}
	e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": key, "name": key, "repository": settings, "merge_policy": policy})
	return &giteaProject{e: e, s: s, t: t, Key: key, Repo: repo}
}

// ticket creates a ready ticket in the project whose description carries
// marker; the scheduler starts it on the template pipeline.
func (p *giteaProject) ticket(marker string) string {
	p.t.Helper()
	var it struct{ Key string }
	p.e.Admin(201, "POST", "/api/v1/projects/"+p.Key+"/items", map[string]any{"type": "task", "title": "Add a greeting",
		"description": "Write the greeting.\n" + marker, "acceptance_criteria": "hello.txt greets " + p.Key, "state": "ready"}).JSON(p.t, &it)
	return it.Key
}

// pull waits for the one pull request of the ticket's branch on Gitea and
// returns it.
func (p *giteaProject) pull(key string) *gitea.PullRequest {
	p.t.Helper()
	var prs []*gitea.PullRequest
	waitFor(p.t, key+"'s pull request on Gitea", func() bool {
		prs = p.Repo.ListPulls(p.t)
		return len(prs) > 0
	})
	if len(prs) != 1 || prs[0].Head.Ref != "ballet/"+key || prs[0].Base.Ref != "main" {
		p.t.Fatalf("pull requests on Gitea: %s", pullsString(prs))
	}
	return prs[0]
}

// pulls is the project's pull requests on Gitea, newest first.
func (p *giteaProject) pulls() []*gitea.PullRequest { return p.Repo.ListPulls(p.t) }

// branchHead is the head commit of branch on Gitea.
func (p *giteaProject) branchHead(branch string) string {
	p.t.Helper()
	b, _, err := p.s.gitea.Client(p.t, p.s.ballet).GetRepoBranch(p.Repo.Owner.Name, p.Repo.Name, branch)
	if err != nil {
		p.t.Fatalf("read the branch %s of %s: %v", branch, p.Repo.FullName(), err)
	}
	return b.Commit.ID
}

// file is a file of commit ref on Gitea.
func (p *giteaProject) file(ref, path string) string {
	p.t.Helper()
	b, _, err := p.s.gitea.Client(p.t, p.s.ballet).GetFile(p.Repo.Owner.Name, p.Repo.Name, ref, path)
	if err != nil {
		p.t.Fatalf("read %s at %s of %s: %v", path, ref, p.Repo.FullName(), err)
	}
	return string(b)
}

func pullsString(prs []*gitea.PullRequest) string {
	var b strings.Builder
	for _, pr := range prs {
		fmt.Fprintf(&b, "#%d %s→%s %s merged=%v head=%s; ", pr.Index, pr.Head.Ref, pr.Base.Ref, pr.State, pr.HasMerged, pr.Head.Sha)
	}
	return b.String()
}

// mergeReports returns the reports of key's merge stage (integrate) that
// ended, oldest first, as "outcome: report".
func (w *giteaWorld) mergeReports(t *testing.T, key string) []string {
	t.Helper()
	var evs struct {
		Events []struct {
			Type    string
			Payload struct{ Stage, Outcome, Report string }
		}
	}
	w.e.Admin(200, "GET", "/api/v1/items/"+key+"/events?limit=1000", nil).JSON(t, &evs)
	var out []string
	for _, e := range evs.Events {
		if (e.Type == "flow.stage_finished" || e.Type == "flow.done" || e.Type == "flow.failed") && e.Payload.Stage == "integrate" {
			out = append(out, e.Payload.Outcome+": "+e.Payload.Report)
		}
	}
	return out
}

// promptsTagged returns the text of every model request of the sessions
// whose marker carries tag=tag (each request repeats the prompt).
func (w *giteaWorld) promptsTagged(t *testing.T, tag string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(w.dump, "*.json"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "tag="+tag+" ") || strings.Contains(string(data), "tag="+tag+"]]") {
			b.Write(data)
		}
	}
	return b.String()
}

// itemState is key's ticket state.
func (w *giteaWorld) itemState(t *testing.T, key string) string {
	t.Helper()
	var it struct{ State string }
	w.e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &it)
	return it.State
}

// TestGiteaEndToEnd takes tickets through the template pipeline (implement
// → review → verify → integrate) on projects whose repositories are on a
// real Gitea, with the real runner and claude-code against the fake model:
// the runner pushes ballet/<KEY> with the lease's credential, Ballet opens
// the pull request, the test plays CI (commit statuses) and people
// (reviews, closing, merging by hand) on Gitea, and Ballet's merge stage
// acts on the project's merge policy. One Core, one runner, one Gitea; a
// project (and repository) per scenario, run in parallel.
func TestGiteaEndToEnd(t *testing.T) {
	t.Parallel()
	w := newGiteaWorld(t)
	o := w.options()
	o.Config.Sessions = 3
	w.start(o)
	started := time.Now()
	t.Cleanup(func() { t.Logf("the scenarios took %v", time.Since(started).Round(100*time.Millisecond)) })

	// a) Success: the runner pushes the branch; Ballet opens one pull
	// request (its marker, the acceptance criteria); CI reports the
	// required check; the collaborator approves; Ballet merges (policy
	// auto, one approval, Gitea's branch protection agreeing); the ticket
	// is done and main holds the branch's head.
	t.Run("success", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		p := w.project(t, w.e, "GA", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{"ci/test"}})
		p.Repo.ProtectBranch(t, "main", []string{"ci/test"}, 1)
		key := p.ticket(fakemodel.Marker("report-done", "content=ga", "tag=ga"))
		pr := p.pull(key)
		head := p.branchHead("ballet/" + key)
		if pr.Head.Sha != head || p.file(head, "hello.txt") != "ga\n" {
			t.Fatalf("the pull request's head %s, the branch's %s with hello.txt %q", pr.Head.Sha, head, p.file(head, "hello.txt"))
		}
		if tk, _, ok := forge.ParseMarker(pr.Body); !ok || tk != key || !strings.Contains(pr.Body, "hello.txt greets GA") || pr.Title != key+": Add a greeting" {
			t.Errorf("pull request %q: %q; want the title, Ballet's marker and the acceptance criteria", pr.Title, pr.Body)
		}
		f := w.await(key, "waiting for checks", func(f coreFlow) bool { return f.Waiting == "checks" || ended(f) })
		if f.Stage != "integrate" || f.Status != "running" {
			t.Fatalf("flow %+v", f)
		}
		p.Repo.SetStatus(t, head, "ci/test", "success")
		w.await(key, "waiting for review", func(f coreFlow) bool { return f.Waiting == "review" || ended(f) })
		p.Repo.Review(t, int(pr.Index), w.reviewer, giteatest.Approve, "Looks good.")
		f = w.await(key, "done", func(f coreFlow) bool { return f.Status == "done" || f.Status == "failed" })
		if f.Status != "done" || w.itemState(t, key) != "done" {
			t.Fatalf("flow %+v, ticket %s", f, w.itemState(t, key))
		}
		if prs := p.pulls(); len(prs) != 1 || !prs[0].HasMerged || prs[0].Head.Sha != head {
			t.Errorf("pull requests after the merge: %s", pullsString(prs))
		}
		if n := p.Repo.MergesOf(t, head); n != 1 {
			t.Errorf("main merged the branch's head %s %d times, want once", head, n)
		}
		t.Logf("Ballet's API calls on Gitea for the ticket: %d", len(w.calls.of(p.Repo.FullName())))
	})

	// b) A failing check fails the merge stage; the next implement session
	// is told which check failed; the loop goes on, CI passes, Ballet
	// merges (no approvals required).
	t.Run("failing check", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		p := w.project(t, w.e, "GB", map[string]any{"mode": "auto", "required_approvals": 0, "required_checks": []string{"ci/lint-gb"}})
		key := p.ticket(fakemodel.Marker("report-done", "content=gb", "tag=gb"))
		pr := p.pull(key)
		p.Repo.SetStatus(t, pr.Head.Sha, "ci/lint-gb", "failure")
		again := w.nthRun(key, 4)
		if again.Stage != "implement" || again.Iteration != 2 {
			t.Fatalf("the run after the failed merge: %+v", again)
		}
		if r := w.mergeReports(t, key); len(r) != 1 || !strings.HasPrefix(r[0], "failed: ") || !strings.Contains(r[0], "ci/lint-gb") {
			t.Errorf("the merge stage's reports: %q", r)
		}
		waitFor(t, "the implement session to be told the failing check", func() bool {
			return strings.Contains(w.promptsTagged(t, "gb"), "ci/lint-gb")
		})
		p.Repo.SetStatus(t, pr.Head.Sha, "ci/lint-gb", "success")
		f := w.await(key, "done", func(f coreFlow) bool { return f.Status == "done" || f.Status == "failed" || f.Waiting == "answer" })
		if f.Status != "done" {
			t.Fatalf("flow %+v; merge reports %q", f, w.mergeReports(t, key))
		}
		if prs := p.pulls(); len(prs) != 1 || !prs[0].HasMerged {
			t.Errorf("pull requests: %s", pullsString(prs))
		}
	})

	// c) Changes requested with words fail the stage; the next implement
	// session gets the reviewer's words. The test then pauses the ticket.
	t.Run("changes requested", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		p := w.project(t, w.e, "GC", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}})
		key := p.ticket(fakemodel.Marker("report-done", "content=gc", "tag=gc"))
		pr := p.pull(key)
		w.await(key, "waiting for review", func(f coreFlow) bool { return f.Waiting == "review" || ended(f) })
		const words = "Please greet in French, gc-words."
		p.Repo.Review(t, int(pr.Index), w.reviewer, giteatest.RequestChanges, words)
		again := w.nthRun(key, 4)
		if again.Stage != "implement" || again.Iteration != 2 {
			t.Fatalf("the run after the failed merge: %+v", again)
		}
		if r := w.mergeReports(t, key); len(r) != 1 || !strings.HasPrefix(r[0], "failed: ") || !strings.Contains(r[0], words) || !strings.Contains(r[0], w.reviewer.Name) {
			t.Errorf("the merge stage's reports: %q", r)
		}
		waitFor(t, "the implement session to be told the reviewer's words", func() bool {
			return strings.Contains(w.promptsTagged(t, "gc"), words)
		})
		w.patchItem(key, map[string]any{"state": "paused"})
	})

	// d) A pull request closed by hand on Gitea fails the stage; the report
	// says it was closed.
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		p := w.project(t, w.e, "GD", map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{}})
		key := p.ticket(fakemodel.Marker("report-done", "content=gd", "tag=gd"))
		pr := p.pull(key)
		w.await(key, "waiting for review", func(f coreFlow) bool { return f.Waiting == "review" || ended(f) })
		p.Repo.ClosePR(t, int(pr.Index))
		again := w.nthRun(key, 4)
		if again.Stage != "implement" {
			t.Fatalf("the run after the failed merge: %+v", again)
		}
		if r := w.mergeReports(t, key); len(r) != 1 || !strings.HasPrefix(r[0], "failed: ") || !strings.Contains(r[0], "closed") {
			t.Errorf("the merge stage's reports: %q", r)
		}
		w.patchItem(key, map[string]any{"state": "paused"})
		if prs := p.pulls(); len(prs) != 1 || prs[0].HasMerged {
			t.Errorf("pull requests: %s", pullsString(prs))
		}
	})

	// e) Manual policy: Ballet waits for a person to merge; a person merges
	// on Gitea; Ballet notices and the ticket is done.
	t.Run("manual", func(t *testing.T) {
		t.Parallel()
		w := w.in(t)
		p := w.project(t, w.e, "GE", map[string]any{"mode": "manual", "required_approvals": 0, "required_checks": []string{}})
		key := p.ticket(fakemodel.Marker("report-done", "content=ge", "tag=ge"))
		pr := p.pull(key)
		f := w.await(key, "waiting for a merge", func(f coreFlow) bool { return f.Waiting == "merge" || ended(f) })
		if f.Status != "waiting" || f.Stage != "integrate" {
			t.Fatalf("flow %+v", f)
		}
		p.Repo.MergeByHand(t, int(pr.Index))
		f = w.await(key, "done", func(f coreFlow) bool { return f.Status == "done" || f.Status == "failed" })
		if f.Status != "done" || w.itemState(t, key) != "done" {
			t.Fatalf("flow %+v, ticket %s", f, w.itemState(t, key))
		}
		// Ballet may mark the pull request "manually merged" when it sees
		// its head in main before Gitea does (State's markMerged, which
		// merges nothing); it must never merge it.
		merges := 0
		for _, c := range w.calls.of(p.Repo.FullName()) {
			if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/merge") && c.Do != "manually-merged" {
				merges++
			}
		}
		if merges != 0 {
			t.Errorf("Ballet called merge %d times under the manual policy", merges)
		}
	})
}
