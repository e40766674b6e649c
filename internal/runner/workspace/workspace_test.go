package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// needGit fails the test without git: workspaces are tested with the real
// one (.ci/run installs it).
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required (apt-get install git): %v", err)
	}
}

// run runs git in dir as a person would, and returns its output.
func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Person", "-c", "user.email=person@example.com",
		"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// remote is a bare repository on disk, with a clone to change it from.
type remote struct {
	t    testing.TB
	url  string // the bare repository
	work string // a person's clone
}

// newRemote makes a repository whose main holds README, src/a.go and
// doc.txt.
func newRemote(t testing.TB) *remote {
	t.Helper()
	needGit(t)
	dir := t.TempDir()
	r := &remote{t: t, url: filepath.Join(dir, "repo.git"), work: filepath.Join(dir, "person")}
	run(t, dir, "init", "--quiet", "--bare", r.url)
	run(t, dir, "init", "--quiet", r.work)
	r.write("README", "hello\n")
	r.write("src/a.go", "package a\n")
	r.write("doc.txt", "line 1\nline 2\nline 3\n")
	r.commit("first commit")
	run(t, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/main")
	return r
}

func (r *remote) write(name, content string) {
	r.t.Helper()
	writeFile(r.t, filepath.Join(r.work, name), content)
}

func (r *remote) commit(msg string) string {
	r.t.Helper()
	run(r.t, r.work, "add", "-A")
	run(r.t, r.work, "commit", "--quiet", "-m", msg)
	return run(r.t, r.work, "rev-parse", "HEAD")
}

// ref is the commit of ref on the remote, "" when it does not exist.
func (r *remote) ref(ref string) string {
	r.t.Helper()
	out := run(r.t, r.work, "ls-remote", r.url, ref)
	sha, _, _ := strings.Cut(out, "\t")
	return sha
}

// show is a file of a commit on the remote.
func (r *remote) show(commit, path string) string {
	r.t.Helper()
	return run(r.t, r.work, "--git-dir="+r.url, "show", commit+":"+path)
}

// files lists the files of a commit on the remote.
func (r *remote) files(commit string) []string {
	r.t.Helper()
	return strings.Fields(run(r.t, r.work, "--git-dir="+r.url, "ls-tree", "-r", "--name-only", commit))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func spec(r *remote, run, stage string) Spec {
	return Spec{Run: run, Ticket: "ACME-1", Stage: stage, Remote: Remote{URL: r.url, DefaultBranch: "main"}}
}

func prepare(t testing.TB, m *Manager, s Spec) *Workspace {
	t.Helper()
	w, err := m.Prepare(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPrepareNewBranch: the branch starts from the default branch, in a
// workspace of its own whose configuration holds no credential and names
// the agent.
func TestPrepareNewBranch(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	w := prepare(t, m, spec(r, "run-1", "implement"))
	if w.Continued || w.Restored != nil || w.Base != r.ref("refs/heads/main") || w.Branch != "ballet/ACME-1" {
		t.Fatalf("%+v", w)
	}
	if got := run(t, w.Dir, "rev-parse", "--abbrev-ref", "HEAD"); got != "ballet/ACME-1" {
		t.Errorf("checked out %s", got)
	}
	if got := run(t, w.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("a fresh workspace is not clean: %s", got)
	}
	if readFile(t, filepath.Join(w.Dir, "src/a.go")) != "package a\n" {
		t.Error("the files of main are not there")
	}
	if got := run(t, w.Dir, "config", "-f", ".git/config", "user.name"); got != AgentName {
		t.Errorf("user.name %q", got)
	}
	if got := run(t, w.Dir, "config", "-f", ".git/config", "remote.origin.url"); got != r.url {
		t.Errorf("origin %q", got)
	}
	if fi, err := os.Stat(w.Home); err != nil || !fi.IsDir() {
		t.Errorf("home: %v", err)
	}
	// The agent's objects are its own copies: nothing is linked to the
	// mirror, which a session could otherwise corrupt.
	if _, err := os.Stat(filepath.Join(w.Dir, ".git", "objects", "info", "alternates")); err == nil {
		t.Error("the workspace borrows objects from elsewhere")
	}
	objects := 0
	err := filepath.WalkDir(filepath.Join(w.Dir, ".git", "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		objects++
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
			t.Errorf("%s is linked %d times: shared with the mirror", p, st.Nlink)
		}
		return nil
	})
	if err != nil || objects == 0 {
		t.Errorf("objects: %d, %v", objects, err)
	}
}

// TestPublish: what the agent committed and what it left uncommitted
// (changed, added, deleted) reach the branch as one commit by the agent on
// the session's base, naming the ticket and stage.
func TestPublish(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	w := prepare(t, m, spec(r, "run-1", "implement"))
	writeFile(t, filepath.Join(w.Dir, "src/a.go"), "package a\n\nfunc A() {}\n")
	run(t, w.Dir, "commit", "--quiet", "-am", "the agent's own commit")
	writeFile(t, filepath.Join(w.Dir, "src/b.go"), "package a\n")
	if err := os.Remove(filepath.Join(w.Dir, "doc.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Dir, "README"), "hello, world\n")

	p, err := w.Publish(context.Background(), "Added A.\n\nAnd b.go, and removed doc.txt.")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Pushed || r.ref("refs/heads/ballet/ACME-1") != p.Commit {
		t.Fatalf("%+v, remote at %s", p, r.ref("refs/heads/ballet/ACME-1"))
	}
	if got, want := r.files(p.Commit), []string{"README", "src/a.go", "src/b.go"}; !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
	if r.show(p.Commit, "README") != "hello, world" || !strings.Contains(r.show(p.Commit, "src/a.go"), "func A") {
		t.Error("the changes are not in the commit")
	}
	meta := run(t, r.work, "--git-dir="+r.url, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%P|%B", p.Commit)
	parts := strings.SplitN(meta, "|", 4)
	if parts[0] != "Ballet agent <agent@ballet.invalid>" || parts[1] != parts[0] || parts[2] != w.Base {
		t.Errorf("author, committer, parent: %q", parts[:3])
	}
	for _, want := range []string{"ACME-1 implement: Added A.", "And b.go, and removed doc.txt.", "Ballet-Ticket: ACME-1", "Ballet-Stage: implement", "Ballet-Run: "} {
		if !strings.Contains(parts[3], want) {
			t.Errorf("message %q lacks %q", parts[3], want)
		}
	}
	// The checkpoint moved to the published commit: a later session of the
	// stage has nothing to restore.
	if got := r.ref("refs/ballet/checkpoints/ACME-1/implement"); got != p.Commit {
		t.Errorf("checkpoint at %s, want %s", got, p.Commit)
	}
	w2 := prepare(t, m, spec(r, "run-2", "implement"))
	if !w2.Continued || w2.Base != p.Commit || w2.Restored != nil {
		t.Errorf("the next session: %+v", w2)
	}
	if err := w2.DropCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.ref("refs/ballet/checkpoints/ACME-1/implement") != "" {
		t.Error("the checkpoint was not dropped")
	}
	if err := w2.DropCheckpoint(context.Background()); err != nil {
		t.Errorf("dropping no checkpoint: %v", err)
	}
}

// TestPublishWithoutAtomic: a server that does not take atomic pushes gets
// the branch, then the checkpoint.
func TestPublishWithoutAtomic(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	run(t, r.work, "--git-dir="+r.url, "config", "receive.advertiseAtomic", "false")
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))
	writeFile(t, filepath.Join(w.Dir, "a.txt"), "a\n")
	p, err := w.Publish(context.Background(), "done")
	if err != nil {
		t.Fatal(err)
	}
	if r.ref("refs/heads/ballet/ACME-1") != p.Commit || r.ref("refs/ballet/checkpoints/ACME-1/implement") != p.Commit {
		t.Fatalf("%+v: branch %s, checkpoint %s", p, r.ref("refs/heads/ballet/ACME-1"), r.ref("refs/ballet/checkpoints/ACME-1/implement"))
	}
}

// TestPublishNothing: a session that changed nothing pushes nothing; one
// whose changes were undone neither.
func TestPublishNothing(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))
	writeFile(t, filepath.Join(w.Dir, "README"), "changed\n")
	writeFile(t, filepath.Join(w.Dir, "README"), "hello\n")
	p, err := w.Publish(context.Background(), "nothing to do")
	if err != nil {
		t.Fatal(err)
	}
	if p.Pushed || p.Commit != "" || r.ref("refs/heads/ballet/ACME-1") != "" {
		t.Fatalf("%+v", p)
	}
}

// TestContinueBranch: a branch on the remote is continued: the session
// starts from its head, and publishes on top of it.
func TestContinueBranch(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	run(t, r.work, "checkout", "--quiet", "-b", "ballet/ACME-1")
	r.write("src/a.go", "package a // reviewed\n")
	head := r.commit("earlier stage")
	run(t, r.work, "push", "--quiet", r.url, "ballet/ACME-1")

	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "review"))
	if !w.Continued || w.Base != head {
		t.Fatalf("%+v, want to continue %s", w, head)
	}
	if readFile(t, filepath.Join(w.Dir, "src/a.go")) != "package a // reviewed\n" {
		t.Error("the branch's files are not there")
	}
	writeFile(t, filepath.Join(w.Dir, "REVIEW.md"), "fine\n")
	p, err := w.Publish(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if parent := run(t, r.work, "--git-dir="+r.url, "rev-parse", p.Commit+"^"); parent != head {
		t.Errorf("parent %s, want %s", parent, head)
	}
	if msg := run(t, r.work, "--git-dir="+r.url, "log", "-1", "--format=%s", p.Commit); msg != "ACME-1 review: changes by the agent" {
		t.Errorf("subject %q", msg)
	}
}

// TestRemoteMoved: when the branch moved on the remote during the session,
// Publish fails clearly and forces nothing; so it does when the agent
// rewrote history... which it cannot: the runner builds on its own base.
func TestRemoteMoved(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))
	run(t, r.work, "checkout", "--quiet", "-b", "ballet/ACME-1")
	r.write("other.txt", "a person pushed meanwhile\n")
	theirs := r.commit("meanwhile")
	run(t, r.work, "push", "--quiet", r.url, "ballet/ACME-1")

	writeFile(t, filepath.Join(w.Dir, "mine.txt"), "the agent's\n")
	_, err := w.Publish(context.Background(), "done")
	if !errors.Is(err, ErrRemoteMoved) {
		t.Fatalf("%v, want ErrRemoteMoved", err)
	}
	if got := r.ref("refs/heads/ballet/ACME-1"); got != theirs {
		t.Errorf("the branch is at %s, want %s (not forced)", got, theirs)
	}
	if got := r.ref("refs/ballet/checkpoints/ACME-1/implement"); got != "" {
		t.Errorf("the atomic push moved the checkpoint to %s anyway", got)
	}
}

// TestAgentCannotSteerTheRunner: hooks, configuration and history the
// agent plants in its .git are never run or used by the runner, which
// holds the credential: no hook runs, the push goes to the real remote
// only, and a rewritten history changes nothing.
func TestAgentCannotSteerTheRunner(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	evil := filepath.Join(t.TempDir(), "evil.git")
	run(t, t.TempDir(), "init", "--quiet", "--bare", evil)
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))

	// A rewritten history: the agent's branch no longer descends from the base.
	run(t, w.Dir, "checkout", "--quiet", "--orphan", "elsewhere")
	run(t, w.Dir, "commit", "--quiet", "-m", "rewritten")
	writeFile(t, filepath.Join(w.Dir, "work.txt"), "done\n")

	// Then traps for the next git that runs in the workspace.
	pwned := filepath.Join(t.TempDir(), "pwned")
	hook := "#!/bin/sh\necho \"$0\" >> " + pwned + "\n"
	for _, h := range []string{"pre-commit", "commit-msg", "pre-push", "post-commit", "reference-transaction", "post-index-change"} {
		writeFile(t, filepath.Join(w.Dir, ".git", "hooks", h), hook)
		if err := os.Chmod(filepath.Join(w.Dir, ".git", "hooks", h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(w.Dir, "fsmonitor.sh"), hook)
	if err := os.Chmod(filepath.Join(w.Dir, "fsmonitor.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"core.fsmonitor", filepath.Join(w.Dir, "fsmonitor.sh")},
		{"url." + evil + ".insteadOf", r.url},
		{"url." + evil + ".pushInsteadOf", r.url},
		{"filter.x.clean", filepath.Join(w.Dir, "fsmonitor.sh")},
	} {
		run(t, w.Dir, "config", kv[0], kv[1])
	}
	writeFile(t, filepath.Join(w.Dir, ".gitattributes"), "* filter=x\n")

	if _, err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := w.Publish(context.Background(), "done")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatalf("the runner ran the agent's code:\n%s", readFile(t, pwned))
	}
	if r.ref("refs/heads/ballet/ACME-1") != p.Commit {
		t.Error("not pushed to the real remote")
	}
	if out := run(t, r.work, "ls-remote", evil); out != "" {
		t.Errorf("pushed to the agent's remote: %s", out)
	}
	if parent := run(t, r.work, "--git-dir="+r.url, "rev-parse", p.Commit+"^"); parent != w.Base {
		t.Errorf("parent %s, want the base %s", parent, w.Base)
	}
	if got := r.show(p.Commit, "work.txt"); got != "done" {
		t.Errorf("work.txt %q", got)
	}
	if slices.Contains(r.files(p.Commit), ".git") {
		t.Error("a .git made it into the commit")
	}
}

// TestPrepareRefuses: what does not pass the forge's rules never reaches
// git.
func TestPrepareRefuses(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	good := spec(r, "run-1", "implement")
	cases := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"run id", func(s *Spec) { s.Run = "../x" }, "run id"},
		{"ticket", func(s *Spec) { s.Ticket = "acme-1" }, "item key"},
		{"stage with a slash", func(s *Spec) { s.Stage = "a/b" }, "stage"},
		{"stage", func(s *Spec) { s.Stage = "a..b" }, "stage"},
		{"ext:: transport", func(s *Spec) { s.Remote.URL = "ext::sh -c touch% /tmp/pwned" }, "remote-helper"},
		{"option", func(s *Spec) { s.Remote.URL = "-oProxyCommand=x" }, "option"},
		{"relative", func(s *Spec) { s.Remote.URL = "repo.git" }, "location"},
		{"default branch", func(s *Spec) { s.Remote.DefaultBranch = "-x" }, "default branch"},
		{"default branch is the ticket's", func(s *Spec) { s.Remote.DefaultBranch = "ballet/ACME-1" }, "ticket's branch"},
		{"credential for a path", func(s *Spec) { s.Remote.Credential = &Credential{Password: "p"} }, "http(s) repositories only"},
		{"credential header injection", func(s *Spec) {
			s.Remote.URL = "https://git.example.com/acme.git"
			s.Remote.Credential = &Credential{Password: "p\r\nX-Evil: 1"}
		}, "control characters"},
		{"empty credential", func(s *Spec) {
			s.Remote.URL = "https://git.example.com/acme.git"
			s.Remote.Credential = &Credential{Username: "u"}
		}, "no password"},
		{"missing default branch", func(s *Spec) { s.Remote.DefaultBranch = "trunk" }, "does not exist"},
	}
	for _, c := range cases {
		s := good
		c.edit(&s)
		if _, err := m.Prepare(context.Background(), s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestMirrorShared: runs on one repository share its mirror, which follows
// the remote.
func TestMirrorShared(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	prepare(t, m, spec(r, "run-1", "implement"))
	r.write("new.txt", "new\n")
	head := r.commit("main moved")
	run(t, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/main")
	s := spec(r, "run-2", "implement")
	s.Ticket = "ACME-2"
	w := prepare(t, m, s)
	if w.Base != head || readFile(t, filepath.Join(w.Dir, "new.txt")) != "new\n" {
		t.Errorf("the second run starts at %s, want %s", w.Base, head)
	}
	entries, err := os.ReadDir(filepath.Join(m.Dir, "mirrors"))
	if err != nil || len(entries) != 1 {
		t.Errorf("mirrors: %v %v", entries, err)
	}
	if err := w.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "runs", "run-2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's folder is still there: %v", err)
	}
}

// TestAhead: after Publish the branch's commits ahead of the default branch
// are counted: 0 when nothing was pushed and the branch does not exist, 1
// after a first publish, the continued branch's own count when a later
// session changed nothing (its commits are still there to review), and
// one more when a later session of the continued branch published.
func TestAhead(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	ctx := context.Background()
	count := func(w *Workspace, p Published) int {
		t.Helper()
		n, err := w.Ahead(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))
	p, err := w.Publish(ctx, "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if n := count(w, p); n != 0 {
		t.Fatalf("nothing pushed, no branch: %d ahead, want 0", n)
	}
	writeFile(t, filepath.Join(w.Dir, "a.txt"), "a\n")
	if p, err = w.Publish(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if n := count(w, p); n != 1 {
		t.Fatalf("after a publish: %d ahead, want 1", n)
	}
	w2 := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-2", "review"))
	if p, err = w2.Publish(ctx, "looks fine"); err != nil || p.Pushed {
		t.Fatalf("%+v %v", p, err)
	}
	if n := count(w2, p); n != 1 {
		t.Fatalf("a review that changed nothing on a branch with 1 commit: %d ahead, want 1", n)
	}
	// A later session that continues the branch and publishes: its own
	// commit counts, on top of the branch's.
	w3 := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-3", "fix"))
	writeFile(t, filepath.Join(w3.Dir, "b.txt"), "b\n")
	if p, err = w3.Publish(ctx, "fixed"); err != nil || !p.Pushed || !w3.Continued {
		t.Fatalf("%+v %v (continued: %v)", p, err, w3.Continued)
	}
	if n := count(w3, p); n != 2 {
		t.Fatalf("a continued branch's publish: %d ahead, want 2", n)
	}
}
