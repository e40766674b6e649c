package uitest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

// giteaProject creates project key of w's organization on a new repository
// of the package's real Gitea (giteatest.Shared), owned by Ballet's own
// Gitea account, whose token Core reads from its environment
// (repository.credentials_ref env:NAME); its pipeline is one merge stage,
// its merge policy manual (Ballet opens the pull request and waits for a
// person to merge it). It returns the repository and two collaborators
// with write access, whose reviews count.
func giteaProject(t *testing.T, w *World, key string) (*giteatest.Repo, giteatest.User, giteatest.User) {
	t.Helper()
	g := giteatest.Shared(t)
	owner := g.CreateUser(t, "ballet")
	alice, bob := g.CreateUser(t, "alice"), g.CreateUser(t, "bob")
	repo := g.CreateRepo(t, owner)
	g.AddCollaborator(t, repo, alice)
	g.AddCollaborator(t, repo, bob)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	env := "ACME_UITEST_GITEA_" + strings.ToUpper(hex.EncodeToString(b))
	// Core resolves env:NAME from its own environment (the process's).
	if err := os.Setenv(env, owner.Name+":"+owner.Token); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(env) })
	w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": key, "name": "On Gitea",
		"repository":   map[string]any{"forge": "gitea", "url": repo.CloneURL, "default_branch": "main", "credentials_ref": "env:" + env},
		"merge_policy": map[string]any{"mode": "manual"}})
	w.Admin(200, "PUT", "/api/v1/projects/"+key+"/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
		"stages": []any{map[string]any{"id": "integrate", "name": "Integrate", "kind": "platform", "action": "merge"}}}})
	return repo, alice, bob
}

// TestPullRequestChecksAndReviews: a ticket at its merge stage on a real
// Gitea, whose pull request Ballet opened and whose failing check failed
// the stage, shows on its page the pull request (number, link, state),
// each commit status of the head with its state and its link (a passing
// build, a failing lint; a status whose target URL is javascript: shows
// with no link), and each reviewer's latest review: Alice's
// approval, given before a later push, marked stale; Bob's, given on the
// head, not.
func TestPullRequestChecksAndReviews(t *testing.T) {
	w := NewWorld(t)
	repo, alice, bob := giteaProject(t, w, "GTA")
	var it struct{ Version int64 }
	w.Admin(201, "POST", "/api/v1/projects/GTA/items", map[string]any{"type": "task", "title": "Greet", "state": "backlog"}).JSON(t, &it)
	first := repo.Commits(t, "ballet/GTA-1", giteatest.Change{File: "greeting.txt", Content: "hello\n", Message: "Add the greeting"})[0]
	w.Admin(200, "PATCH", "/api/v1/items/GTA-1", map[string]any{"version": it.Version, "state": "ready"})

	// The merge stage opens the pull request.
	var number int
	apitest.Await(t, "GTA-1's pull request on Gitea", func() bool {
		for _, pr := range repo.ListPulls(t) {
			if pr.Head != nil && pr.Head.Ref == "ballet/GTA-1" {
				number = int(pr.Index)
			}
		}
		return number != 0
	})
	if f := w.AwaitFlow("GTA-1", "the merge stage", func(f Flow) bool { return f.Stage == "integrate" }); f.Status == "failed" {
		t.Fatalf("the flow failed: %+v", f)
	}
	pr := repo.Pull(t, number)

	// Alice approves the first head; a push moves it; Bob approves the
	// new one (once Gitea's pull request has it: a review names the pull
	// request's head as Gitea knows it). CI reports on the new head.
	repo.Review(t, number, alice, giteatest.Approve, "Looks good")
	head := repo.Commits(t, "ballet/GTA-1", giteatest.Change{File: "greeting.txt", Content: "hello, world\n", Message: "Greet the world"})[0]
	apitest.Await(t, "Gitea to see the new head of #"+pr.Head.Ref, func() bool { return repo.Pull(t, number).Head.Sha == head })
	repo.Review(t, number, bob, giteatest.Approve, "Still good")
	build := "http://127.0.0.1:9/ci/build/17"
	lint := "http://127.0.0.1:9/ci/lint/18"
	repo.SetStatusURL(t, head, "ci/build", "success", build)
	repo.SetStatusURL(t, head, "ci/lint", "failure", lint)
	// A check's target URL is whatever CI sent: one that is no web page
	// must not become a link that runs script on Ballet's page.
	repo.SetStatusURL(t, head, "ci/evil", "error", "javascript:window.pwned=1")
	if first == head {
		t.Fatal("the push did not move the head")
	}
	// The merge stage reads the same failing check and fails: the ticket
	// waits at it for a person, who reads why on its page.
	if f := w.AwaitFlow("GTA-1", "the merge stage to fail on ci/lint", func(f Flow) bool { return f.Waiting == "answer" }); f.Stage != "integrate" {
		t.Fatalf("the flow waits at %+v, want the merge stage", f)
	}

	p := NewPage(t, w.URL)
	p.SignIn(apitest.BootstrapToken, "/items/GTA-1")
	p.WaitText(`[data-testid="changes-head"]`, head[:7])
	p.WaitText(`[data-testid="pull-request"] h4`, "#"+strconv.Itoa(number))
	if got := Eval[string](p, `document.querySelector('[data-testid="pull-request"] h4 a')?.getAttribute("href") ?? ""`); got != pr.HTMLURL {
		t.Errorf("the pull request links %q, want %s", got, pr.HTMLURL)
	}
	if got := p.Text(`[data-testid="pull-request"] .badge`); got != "open" {
		t.Errorf("the pull request's state reads %q, want open", got)
	}
	type item struct{ Text, Href, Badge string }
	items := func(list string) []item {
		return Eval[[]item](p, `[...document.querySelectorAll('[data-testid="pull-request"] [data-testid="`+list+`"] li')].map(li => ({
			text: li.textContent.replace(/\s+/g, " ").trim(), href: li.querySelector("a")?.getAttribute("href") ?? "",
			badge: [...li.querySelectorAll(".badge")].map(b => b.textContent).join("|")}))`)
	}
	p.WaitJS(`document.querySelectorAll('[data-testid="checks"] li').length === 3`, "three checks")
	checks := items("checks")
	wantChecks := []item{{Text: "success ci/build", Href: build, Badge: "success"}, {Text: "failure ci/lint", Href: lint, Badge: "failure"},
		{Text: "failure ci/evil", Badge: "failure"}}
	if len(checks) != len(wantChecks) {
		t.Fatalf("checks %+v, want %+v", checks, wantChecks)
	}
	for _, want := range wantChecks {
		found := false
		for _, c := range checks {
			found = found || c == want
		}
		if !found {
			t.Errorf("no check %+v in %+v", want, checks)
		}
	}
	reviews := items("reviews")
	byName := map[string]item{}
	for _, r := range reviews {
		byName[strings.SplitN(r.Text, ":", 2)[0]] = r
	}
	if len(reviews) != 2 {
		t.Errorf("reviews %+v, want Alice's and Bob's", reviews)
	}
	if r := byName[alice.Name]; !strings.Contains(r.Text, "approved") || r.Badge != "stale: given before the last push" || !strings.Contains(r.Href, "/pulls/"+strconv.Itoa(number)) {
		t.Errorf("Alice's review reads %+v, want approved, marked stale, linked to the pull request", r)
	}
	if r := byName[bob.Name]; !strings.Contains(r.Text, "approved") || r.Badge != "" || !strings.Contains(r.Href, "/pulls/"+strconv.Itoa(number)) {
		t.Errorf("Bob's review reads %+v, want approved, not stale, linked to the pull request", r)
	}
	p.Check("pull-request")
}
