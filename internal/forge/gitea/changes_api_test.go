package gitea_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestTheChangesOfAGiteaProject: GET /api/v1/items/{item}/changes on a
// whole Core whose project lives on the package's real Gitea answers what
// Gitea holds: the branch's commit and patch, and its pull request with
// the status CI reported and the collaborator's approval.
func TestTheChangesOfAGiteaProject(t *testing.T) {
	t.Parallel() // beside the contract's cases, on the same Gitea
	g := giteatest.Shared(t)
	owner, reviewer := g.CreateUser(t, "owner"), g.CreateUser(t, "reviewer")
	repo := g.CreateRepo(t, owner)
	g.AddCollaborator(t, repo, reviewer)
	// Core resolves env:NAME from the process's environment (t.Setenv
	// refuses a parallel test): a name of this test's own.
	env := "ACME_GITEA_CHANGES_" + strings.ToUpper(owner.Name)
	if err := os.Setenv(env, owner.Name+":"+owner.Token); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(env) })

	e := apitest.New(t, storetest.Open(t, "sqlite"))
	e.Org("acme")
	e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "ACME", "repository": map[string]any{
		"forge": "gitea", "url": repo.CloneURL, "default_branch": "main", "credentials_ref": "env:" + env}})
	var it struct{ Key string }
	e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "greet"}).JSON(t, &it)
	branch := "ballet/" + it.Key

	head := repo.Commits(t, branch, giteatest.Change{File: "hello.txt", Content: "hello\n", Message: it.Key + " implement: greet\n\nwith a body"})[0]
	n := repo.CreatePR(t, branch, it.Key+" greet", "")
	repo.SetStatusURL(t, head, "ci", "success", "http://127.0.0.1:9/ci")
	repo.Review(t, n, reviewer, giteatest.Approve, "fine")

	var c struct {
		Branch, Base, Head string
		Ahead              int
		Commits            []struct{ SHA, Title, Author string }
		Files              []struct {
			Path, Status, Patch string
			Additions           int
		}
		PullRequest *struct {
			Number     int
			URL, State string
			Checks     []struct{ Name, State, URL string }
			Reviews    []struct {
				Reviewer, State string
				Stale           bool
			}
		} `json:"pull_request"`
	}
	e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/changes", nil).JSON(t, &c)
	if c.Branch != branch || c.Base != "main" || c.Head != head || c.Ahead != 1 || len(c.Commits) != 1 ||
		c.Commits[0].SHA != head || c.Commits[0].Title != it.Key+" implement: greet" || c.Commits[0].Author == "" {
		t.Fatalf("the branch: %+v", c)
	}
	if len(c.Files) != 1 || c.Files[0].Path != "hello.txt" || c.Files[0].Status != "added" || c.Files[0].Additions != 1 ||
		c.Files[0].Patch != "@@ -0,0 +1 @@\n+hello\n" {
		t.Fatalf("the files: %+v", c.Files)
	}
	p := c.PullRequest
	if p == nil || p.Number != n || p.State != "open" || !strings.HasSuffix(p.URL, "/pulls/"+strconv.Itoa(n)) {
		t.Fatalf("the pull request: %+v", p)
	}
	if len(p.Checks) != 1 || p.Checks[0].Name != "ci" || p.Checks[0].State != "success" || p.Checks[0].URL != "http://127.0.0.1:9/ci" {
		t.Fatalf("the checks: %+v", p.Checks)
	}
	if len(p.Reviews) != 1 || p.Reviews[0].Reviewer != reviewer.Name || p.Reviews[0].State != "approved" || p.Reviews[0].Stale {
		t.Fatalf("the reviews: %+v", p.Reviews)
	}
}
