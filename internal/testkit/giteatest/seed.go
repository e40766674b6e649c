package giteatest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/ballet/ballet/internal/gitexec"
)

// Repo is a repository on a Server, with a local work clone (made on first
// push) that plays the agent and the humans.
type Repo struct {
	Owner    User
	Name     string
	CloneURL string // http://127.0.0.1:port/owner/name.git

	srv  *Server
	mu   sync.Mutex // guards the work clone
	work string
	n    int // commits made, for unique contents
}

// FullName is owner/name.
func (r *Repo) FullName() string { return r.Owner.Name + "/" + r.Name }

// CreateUser creates a user (name: prefix and a number) with a token.
func (s *Server) CreateUser(t testing.TB, prefix string) User {
	t.Helper()
	pw, err := secret(12)
	if err != nil {
		t.Fatal(err)
	}
	u := User{Name: s.unique(prefix), Password: pw}
	s.api(t, s.Admin, http.MethodPost, "/admin/users", map[string]any{
		"username": u.Name, "email": u.Name + "@ballet.invalid", "password": pw, "must_change_password": false,
	}, http.StatusCreated, nil)
	if u.Token, err = s.newToken(context.Background(), u); err != nil {
		t.Fatalf("giteatest: %v", err)
	}
	return u
}

// CreateRepo creates a repository of owner with an initial commit (a
// README) on main.
func (s *Server) CreateRepo(t testing.TB, owner User) *Repo {
	t.Helper()
	var got struct {
		CloneURL string `json:"clone_url"`
	}
	name := s.unique("repo")
	s.api(t, owner, http.MethodPost, "/user/repos", map[string]any{
		"name": name, "auto_init": true, "default_branch": "main", "readme": "Default",
	}, http.StatusCreated, &got)
	return &Repo{Owner: owner, Name: name, CloneURL: got.CloneURL, srv: s}
}

// AddCollaborator gives u write access to r.
func (s *Server) AddCollaborator(t testing.TB, r *Repo, u User) {
	t.Helper()
	s.api(t, r.Owner, http.MethodPut, "/repos/"+r.FullName()+"/collaborators/"+u.Name,
		map[string]any{"permission": "write"}, http.StatusNoContent, nil)
}

// Commit commits file with content on branch (created from main when it
// does not exist yet), pushes it over HTTP as the owner, and returns the
// new head commit.
func (r *Repo) Commit(t testing.TB, branch, file, content string) string {
	t.Helper()
	r.mu.Lock()
	n := r.n + 1
	r.mu.Unlock()
	return r.Commits(t, branch, Change{File: file, Content: content + "\n", Message: fmt.Sprintf("change %s (%d)", file, n)})[0]
}

// Change is a commit that writes one file.
type Change struct {
	File, Content string // the content as it is
	Message       string // as written
}

// Commits makes one commit of each change on branch (created from main
// when it does not exist yet), pushes them at once over HTTP as the owner,
// and returns their ids, in order.
func (r *Repo) Commits(t testing.TB, branch string, changes ...Change) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clone(t)
	r.git(t, "fetch", "--quiet", "--prune", "origin")
	from := "origin/main"
	if r.git(t, "branch", "--remotes", "--list", "origin/"+branch) != "" {
		from = "origin/" + branch
	}
	r.git(t, "checkout", "--quiet", "-B", branch, from)
	var shas []string
	for _, c := range changes {
		r.n++
		if err := os.WriteFile(filepath.Join(r.work, c.File), []byte(c.Content), 0o644); err != nil {
			t.Fatal(err)
		}
		r.git(t, "add", "--", c.File)
		r.git(t, "commit", "--quiet", "--allow-empty", "--cleanup=verbatim", "-m", c.Message)
		shas = append(shas, r.git(t, "rev-parse", "HEAD"))
	}
	r.git(t, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return shas
}

// PushBranch pushes one more commit on branch (from main when new) and
// returns its head commit.
func (r *Repo) PushBranch(t testing.TB, branch string) string {
	t.Helper()
	r.mu.Lock()
	n := r.n
	r.mu.Unlock()
	return r.Commit(t, branch, strings.ReplaceAll(branch, "/", "_")+".txt", fmt.Sprintf("%s %d", branch, n))
}

// PushTo pushes commit sha (already on the server) to branch as the owner,
// fast-forward only: a person merging by hand with git, without the pull
// request.
func (r *Repo) PushTo(t testing.TB, sha, branch string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clone(t)
	r.git(t, "fetch", "--quiet", "--prune", "origin")
	r.git(t, "push", "--quiet", "origin", sha+":refs/heads/"+branch)
}

// AllowManualMerge lets pull requests of the repository be marked merged
// by hand ("manually merged" at a commit of the base), as a team allows it
// in the repository's settings.
func (r *Repo) AllowManualMerge(t testing.TB) {
	t.Helper()
	r.srv.api(t, r.Owner, http.MethodPatch, "/repos/"+r.FullName(), map[string]any{"allow_manual_merge": true}, http.StatusOK, nil)
}

// DeleteBranch deletes branch on the server.
func (r *Repo) DeleteBranch(t testing.TB, branch string) {
	t.Helper()
	r.srv.api(t, r.Owner, http.MethodDelete, "/repos/"+r.FullName()+"/branches/"+branch, nil, http.StatusNoContent, nil)
}

func (r *Repo) clone(t testing.TB) {
	t.Helper()
	if r.work != "" {
		return
	}
	dir, err := os.MkdirTemp(r.srv.Dir, "work-")
	if err != nil {
		t.Fatal(err)
	}
	r.work = filepath.Join(dir, r.Name)
	r.run(t, dir, "clone", "--quiet", "--config", "http.extraHeader=Authorization: token "+r.Owner.Token, "--", r.CloneURL, r.work)
}

func (r *Repo) git(t testing.TB, args ...string) string {
	t.Helper()
	return r.run(t, r.work, args...)
}

func (r *Repo) run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), maxWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	home := filepath.Join(r.srv.Dir, "home")
	cmd.Env = append(gitexec.Base(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, "test-gitconfig"),
		"GIT_AUTHOR_NAME="+r.Owner.Name, "GIT_AUTHOR_EMAIL="+r.Owner.Name+"@ballet.invalid",
		"GIT_COMMITTER_NAME="+r.Owner.Name, "GIT_COMMITTER_EMAIL="+r.Owner.Name+"@ballet.invalid")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("giteatest: git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// SetStatus sets a commit status (state: pending, success, error, failure,
// warning) of context on sha, as the owner — as CI would.
func (r *Repo) SetStatus(t testing.TB, sha, context, state string) {
	t.Helper()
	r.SetStatusURL(t, sha, context, state, "")
}

// SetStatusURL is SetStatus with the status's target URL (its page).
func (r *Repo) SetStatusURL(t testing.TB, sha, context, state, targetURL string) {
	t.Helper()
	r.srv.api(t, r.Owner, http.MethodPost, "/repos/"+r.FullName()+"/statuses/"+sha,
		map[string]any{"context": context, "state": state, "description": context + " " + state, "target_url": targetURL}, http.StatusCreated, nil)
}

// CreatePR opens a pull request of head into main by hand, as the owner,
// and returns its number.
func (r *Repo) CreatePR(t testing.TB, head, title, body string) int {
	t.Helper()
	var pr struct {
		Number int `json:"number"`
	}
	r.srv.api(t, r.Owner, http.MethodPost, "/repos/"+r.FullName()+"/pulls",
		map[string]any{"head": head, "base": "main", "title": title, "body": body}, http.StatusCreated, &pr)
	return pr.Number
}

// Review events.
const (
	Approve        = "APPROVED"
	RequestChanges = "REQUEST_CHANGES"
	Comment        = "COMMENT"
)

// Review submits a review of pull request n as u (event Approve,
// RequestChanges or Comment) and returns its id.
func (r *Repo) Review(t testing.TB, n int, as User, event, body string) int64 {
	t.Helper()
	var rv struct {
		ID int64 `json:"id"`
	}
	r.srv.api(t, as, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", r.FullName(), n),
		map[string]any{"event": event, "body": body}, http.StatusOK, &rv)
	return rv.ID
}

// DismissReview dismisses review id of pull request n, as the owner.
func (r *Repo) DismissReview(t testing.TB, n int, id int64) {
	t.Helper()
	r.srv.api(t, r.Owner, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews/%d/dismissals", r.FullName(), n, id),
		map[string]any{"message": "dismissed by the test"}, http.StatusOK, nil)
}

// ClosePR closes pull request n without merging, as the owner.
func (r *Repo) ClosePR(t testing.TB, n int) {
	t.Helper()
	r.srv.api(t, r.Owner, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", r.FullName(), n),
		map[string]any{"state": "closed"}, http.StatusCreated, nil)
}

// MergeByHand merges pull request n as the owner would on the web page,
// waiting (bounded) while Gitea still checks whether it merges cleanly.
func (r *Repo) MergeByHand(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(maxWait)
	for {
		status, body, err := r.srv.do(context.Background(), http.MethodPost, fmt.Sprintf("/api/v1/repos/%s/pulls/%d/merge", r.FullName(), n),
			"token "+r.Owner.Token, map[string]any{"Do": "merge"})
		if err == nil && status == http.StatusOK {
			return
		}
		if err != nil || status != http.StatusMethodNotAllowed || time.Now().After(deadline) {
			t.Fatalf("giteatest: merge %s#%d by hand: HTTP %d %s %v", r.FullName(), n, status, body, err)
		}
		time.Sleep(pollInterval)
	}
}

// ProtectBranch protects branch: merges need the given status contexts to
// pass and the given number of approvals (by users with write access). The
// owner can still push to it.
func (r *Repo) ProtectBranch(t testing.TB, branch string, contexts []string, approvals int) {
	t.Helper()
	r.Protect(t, branch, contexts, approvals, false)
}

// Protect is ProtectBranch, and with dismissStale a push to a pull
// request's head dismisses its approvals.
func (r *Repo) Protect(t testing.TB, branch string, contexts []string, approvals int, dismissStale bool) {
	t.Helper()
	r.srv.api(t, r.Owner, http.MethodPost, "/repos/"+r.FullName()+"/branch_protections", map[string]any{
		"rule_name": branch, "enable_push": true,
		"enable_status_check": len(contexts) > 0, "status_check_contexts": contexts,
		"required_approvals": approvals, "dismiss_stale_approvals": dismissStale,
	}, http.StatusCreated, nil)
}

// Pull reads pull request n.
func (r *Repo) Pull(t testing.TB, n int) *gitea.PullRequest {
	t.Helper()
	pr, _, err := r.srv.Client(t, r.Owner).GetPullRequest(r.Owner.Name, r.Name, int64(n))
	if err != nil {
		t.Fatalf("giteatest: read %s#%d: %v", r.FullName(), n, err)
	}
	return pr
}

// ListPulls lists every pull request of r, open or not, newest first.
func (r *Repo) ListPulls(t testing.TB) []*gitea.PullRequest {
	t.Helper()
	var all []*gitea.PullRequest
	c := r.srv.Client(t, r.Owner)
	for page := 1; ; page++ {
		prs, _, err := c.ListRepoPullRequests(r.Owner.Name, r.Name, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: 50}, State: gitea.StateAll,
		})
		if err != nil {
			t.Fatalf("giteatest: list the pull requests of %s: %v", r.FullName(), err)
		}
		all = append(all, prs...)
		if len(prs) < 50 {
			return all
		}
	}
}

// CreateWebhook adds a Gitea webhook delivering events (e.g.
// "pull_request", "pull_request_review_approved", "status") to url, signed
// with secret, and returns its id.
func (r *Repo) CreateWebhook(t testing.TB, url, secret string, events []string) int64 {
	t.Helper()
	var h struct {
		ID int64 `json:"id"`
	}
	r.srv.api(t, r.Owner, http.MethodPost, "/repos/"+r.FullName()+"/hooks", map[string]any{
		"type": "gitea", "active": true, "events": events,
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, http.StatusCreated, &h)
	return h.ID
}

// api sends one API call as u and fails the test unless it answers want;
// the JSON answer goes into out when it is not nil.
func (s *Server) api(t testing.TB, u User, method, path string, body any, want int, out any) {
	t.Helper()
	status, b, err := s.do(context.Background(), method, "/api/v1"+path, "token "+u.Token, body)
	if err != nil || status != want {
		t.Fatalf("giteatest: %s %s as %s: HTTP %d, want %d: %s %v", method, path, u.Name, status, want, b, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("giteatest: %s %s: %v: %s", method, path, err, b)
		}
	}
}

// MergesOf counts the merge commits on main that merged commit sha.
func (r *Repo) MergesOf(t testing.TB, sha string) int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clone(t)
	r.git(t, "fetch", "--quiet", "--prune", "origin")
	n := 0
	for _, line := range strings.Split(r.git(t, "log", "--merges", "--format=%P", "origin/main", "--"), "\n") {
		if p := strings.Fields(line); len(p) > 1 && slices.Contains(p[1:], sha) {
			n++
		}
	}
	return n
}
