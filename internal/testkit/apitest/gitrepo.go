package apitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitRepo is a real bare repository with a work clone, standing in for a
// plain-git forge: tests push branches as an agent would and merge them as
// a human would.
type GitRepo struct {
	t    testing.TB
	Bare string
	Work string
}

// NewGitRepo creates a bare repository whose main branch has one commit.
func NewGitRepo(t testing.TB) *GitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required (apt-get install git): %v", err)
	}
	dir := t.TempDir()
	g := &GitRepo{t: t, Bare: filepath.Join(dir, "repo.git"), Work: filepath.Join(dir, "work")}
	g.git(dir, "init", "--bare", "--initial-branch=main", g.Bare)
	g.git(dir, "clone", g.Bare, g.Work)
	g.git(g.Work, "checkout", "-B", "main")
	g.commit("README.md", "hello\n")
	g.git(g.Work, "push", "origin", "main")
	return g
}

func (g *GitRepo) git(dir string, args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (g *GitRepo) commit(file, content string) {
	g.t.Helper()
	if err := os.WriteFile(filepath.Join(g.Work, file), []byte(content), 0o644); err != nil {
		g.t.Fatal(err)
	}
	g.git(g.Work, "add", file)
	g.git(g.Work, "commit", "-m", "change "+file)
}

// PushBranch commits on branch (created from main) and pushes it, as an
// agent does.
func (g *GitRepo) PushBranch(branch string) {
	g.t.Helper()
	g.git(g.Work, "checkout", "-B", branch, "origin/main")
	g.commit(strings.ReplaceAll(branch, "/", "_")+".txt", branch+"\n")
	g.git(g.Work, "push", "-f", "origin", branch)
	g.git(g.Work, "checkout", "main")
}

// MergeBranch merges branch into main and pushes, as a human does; delete
// also deletes the branch on the remote.
func (g *GitRepo) MergeBranch(branch string, delete bool) {
	g.t.Helper()
	g.git(g.Work, "fetch", "origin")
	g.git(g.Work, "checkout", "main")
	g.git(g.Work, "reset", "--hard", "origin/main")
	g.git(g.Work, "merge", "--no-ff", "-m", "merge "+branch, "origin/"+branch)
	g.git(g.Work, "push", "origin", "main")
	if delete {
		g.git(g.Work, "push", "origin", "--delete", branch)
	}
}

// Head is the head commit of branch in the bare repository.
func (g *GitRepo) Head(branch string) string {
	g.t.Helper()
	return g.git(g.Bare, "rev-parse", "refs/heads/"+branch)
}

// CommitFiles writes files (path → content, folders made as needed) on
// branch — continuing the remote's branch when it exists, else starting
// from main — commits them with message and pushes, as Ballet's runner
// does; it returns the new head.
func (g *GitRepo) CommitFiles(branch string, files map[string]string, message string) string {
	g.t.Helper()
	g.git(g.Work, "fetch", "origin")
	from := "origin/main"
	if exec.Command("git", "-C", g.Bare, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Run() == nil {
		from = "origin/" + branch
	}
	g.git(g.Work, "checkout", "-B", branch, from)
	for path, content := range files {
		full := filepath.Join(g.Work, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
		g.git(g.Work, "add", path)
	}
	g.git(g.Work, "commit", "-q", "-m", message)
	g.git(g.Work, "push", "-q", "origin", branch)
	g.git(g.Work, "checkout", "-q", "main")
	return g.Head(branch)
}
