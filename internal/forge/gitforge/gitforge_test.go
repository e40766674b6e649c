package gitforge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/forge"
)

// hangEnv makes this test binary, run as a fake git, hang until it is
// killed (TestMain): a fake that needs no sleep binary nor shell.
const hangEnv = "GITFORGE_TEST_HANG"

func TestMain(m *testing.M) {
	if os.Getenv(hangEnv) == "1" {
		time.Sleep(2 * time.Minute) // a hang guard: killed long before by the forge under test
		fmt.Fprintln(os.Stderr, "fake git: not killed")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// needGit fails the test without git: the plain-git forge is tested with
// the real one (.ci/run installs it).
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required (apt-get install git): %v", err)
	}
}

// world is a bare repository "origin" with a work clone that plays the
// agent (pushing branches) and the human (merging).
type world struct {
	t    *testing.T
	dir  string
	bare string // the bare repository's path
	work string // the work clone
	env  []string
	n    int // commits made, for unique contents
}

func setup(t *testing.T) *world {
	t.Helper()
	needGit(t)
	dir := t.TempDir()
	w := &world{t: t, dir: dir, bare: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			w.env = append(w.env, kv)
		}
	}
	w.env = append(w.env, "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(dir, "gitconfig"),
		"GIT_TERMINAL_PROMPT=0", "GIT_AUTHOR_NAME=Ballet Test", "GIT_AUTHOR_EMAIL=test@ballet.invalid",
		"GIT_COMMITTER_NAME=Ballet Test", "GIT_COMMITTER_EMAIL=test@ballet.invalid")
	w.run(dir, "init", "--quiet", "--bare", "--initial-branch=main", w.bare)
	w.run(dir, "init", "--quiet", "--initial-branch=main", w.work)
	w.git("remote", "add", "origin", w.bare)
	w.commit("README", "hello")
	w.git("push", "--quiet", "origin", "main")
	return w
}

func (w *world) run(dir string, args ...string) string {
	w.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, w.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// git runs git in the work clone.
func (w *world) git(args ...string) string { w.t.Helper(); return w.run(w.work, args...) }

// commit commits a file on the current branch and returns the commit id.
func (w *world) commit(file, content string) string {
	w.t.Helper()
	w.n++
	if err := os.WriteFile(filepath.Join(w.work, file), []byte(fmt.Sprintf("%s %d\n", content, w.n)), 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.git("add", file)
	w.git("commit", "--quiet", "-m", "change "+file)
	return w.git("rev-parse", "HEAD")
}

// pushBranch creates branch from main with one commit and pushes it.
func (w *world) pushBranch(branch string) string {
	w.t.Helper()
	w.git("checkout", "--quiet", "-b", branch, "main")
	sha := w.commit(strings.ReplaceAll(branch, "/", "_")+".txt", branch)
	w.git("push", "--quiet", "origin", branch)
	w.git("checkout", "--quiet", "main")
	return sha
}

func (w *world) state(f *Forge, repo forge.Repo, pr forge.PullRequest) forge.State {
	w.t.Helper()
	st, err := f.State(context.Background(), repo, pr)
	if err != nil {
		w.t.Fatalf("State(%+v): %v", pr, err)
	}
	return st
}

func (w *world) ensure(f *Forge, repo forge.Repo, branch string) forge.PullRequest {
	w.t.Helper()
	pr, err := f.EnsurePullRequest(context.Background(), repo, branch, "title", "body")
	if err != nil {
		w.t.Fatalf("EnsurePullRequest(%s): %v", branch, err)
	}
	return pr
}

// flags renders the interesting part of a State.
func flags(st forge.State) string {
	var s []string
	for _, f := range []struct {
		on   bool
		name string
	}{{st.BranchPushed, "pushed"}, {st.Open, "open"}, {st.Merged, "merged"}, {st.Closed, "closed"}} {
		if f.on {
			s = append(s, f.name)
		}
	}
	return strings.Join(s, ",")
}

func decide(st forge.State) forge.Decision {
	return forge.Decide(forge.Policy{Mode: forge.PolicyAuto}, false, st)
}

// TestLifecycle walks a ticket's branch through what a human does with it,
// on a bare repository given by path and by file:// URL (through a mirror).
func TestLifecycle(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"path", "file URL"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			w := setup(t)
			cache := filepath.Join(w.dir, "cache")
			f := New(cache)
			repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
			if kind == "file URL" {
				repo.URL = "file://" + w.bare
			}
			ctx := context.Background()

			// Never pushed.
			_, err := f.EnsurePullRequest(ctx, repo, "ACME-1", "t", "b")
			if !errors.Is(err, forge.ErrBranchNotPushed) || !strings.Contains(err.Error(), "ACME-1") {
				t.Fatalf("EnsurePullRequest before the push: %v, want ErrBranchNotPushed", err)
			}
			st := w.state(f, repo, forge.PullRequest{Branch: "ACME-1", Base: "main"})
			if flags(st) != "" || st.HeadSHA != "" || st.Checks != forge.ChecksNone || st.Mergeable != nil {
				t.Fatalf("never pushed: %+v", st)
			}
			if d := decide(st); d.Action != forge.ActionFailed || d.Reason != "the branch ACME-1 was never pushed" {
				t.Fatalf("never pushed: %+v", d)
			}

			// Pushed: open, a human has to merge.
			c1 := w.pushBranch("ACME-1")
			pr := w.ensure(f, repo, "ACME-1")
			if pr != (forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c1}) {
				t.Fatalf("pull request %+v, want head %s", pr, c1)
			}
			st = w.state(f, repo, pr)
			if flags(st) != "pushed,open" || st.HeadSHA != c1 || st.Branch != "ACME-1" || st.Base != "main" {
				t.Fatalf("pushed: %+v", st)
			}
			if d := decide(st); d.Action != forge.ActionWait || d.Waiting != forge.WaitMerge {
				t.Fatalf("pushed: %+v", d)
			}
			if again := w.ensure(f, repo, "ACME-1"); again != pr {
				t.Fatalf("second EnsurePullRequest %+v, want %+v", again, pr)
			}

			// The agent pushes more; a human fast-forwards main to it.
			w.git("checkout", "--quiet", "ACME-1")
			c2 := w.commit("more.txt", "more")
			w.git("push", "--quiet", "origin", "ACME-1")
			w.git("checkout", "--quiet", "main")
			if st = w.state(f, repo, pr); flags(st) != "pushed,open" || st.HeadSHA != c2 {
				t.Fatalf("pushed again: %+v, want head %s", st, c2)
			}
			w.git("push", "--quiet", "origin", "ACME-1:main")
			st = w.state(f, repo, pr)
			if flags(st) != "pushed,merged" || st.HeadSHA != c2 {
				t.Fatalf("fast-forwarded: %+v", st)
			}
			if d := decide(st); d.Action != forge.ActionDone || d.Reason != "the branch ACME-1 was merged into main" {
				t.Fatalf("fast-forwarded: %+v", d)
			}

			// The branch is deleted after the merge: still merged, by the recorded head.
			w.git("push", "--quiet", "origin", "--delete", "ACME-1")
			if st = w.state(f, repo, forge.PullRequest{Branch: "ACME-1", Base: "main", HeadSHA: c2}); flags(st) != "merged" || st.HeadSHA != c2 {
				t.Fatalf("deleted after merge: %+v", st)
			}
			// Without a recorded head it looks never pushed.
			if st = w.state(f, repo, forge.PullRequest{Branch: "ACME-1", Base: "main"}); flags(st) != "" {
				t.Fatalf("deleted, nothing recorded: %+v", st)
			}

			// A merge commit: main moved on, a human merges with --no-ff.
			w.git("pull", "--quiet", "--ff-only", "origin", "main")
			c3 := w.pushBranch("ACME-2")
			w.commit("main.txt", "main moved")
			w.git("push", "--quiet", "origin", "main")
			pr2 := w.ensure(f, repo, "ACME-2")
			if st = w.state(f, repo, pr2); flags(st) != "pushed,open" || st.HeadSHA != c3 {
				t.Fatalf("diverged: %+v", st)
			}
			w.git("merge", "--quiet", "--no-ff", "-m", "Merge ACME-2", "ACME-2")
			w.git("push", "--quiet", "origin", "main")
			if st = w.state(f, repo, pr2); flags(st) != "pushed,merged" {
				t.Fatalf("merge commit: %+v", st)
			}
			w.git("push", "--quiet", "origin", "--delete", "ACME-2")
			if st = w.state(f, repo, pr2); flags(st) != "merged" {
				t.Fatalf("merge commit, branch deleted: %+v", st)
			}

			// Deleted without merging: closed, also once git collected its objects.
			c4 := w.pushBranch("ACME-3")
			pr3 := w.ensure(f, repo, "ACME-3")
			w.git("push", "--quiet", "origin", "--delete", "ACME-3")
			st = w.state(f, repo, pr3)
			if flags(st) != "closed" || st.HeadSHA != c4 {
				t.Fatalf("deleted unmerged: %+v", st)
			}
			if d := decide(st); d.Action != forge.ActionFailed || d.Reason != "the branch ACME-3 was deleted without being merged into main" {
				t.Fatalf("deleted unmerged: %+v", d)
			}
			w.run(w.dir, "--git-dir="+w.bare, "gc", "--quiet", "--prune=now")
			if st = w.state(f, repo, pr3); flags(st) != "closed" {
				t.Fatalf("deleted unmerged, after gc: %+v", st)
			}

			// The name is used again after the merge: open again.
			w.git("branch", "--quiet", "-D", "ACME-1")
			c5 := w.pushBranch("ACME-1")
			if st = w.state(f, repo, pr); flags(st) != "pushed,open" || st.HeadSHA != c5 {
				t.Fatalf("reused name: %+v", st)
			}

			mirrors, _ := filepath.Glob(filepath.Join(cache, "*.git"))
			if want := map[string]int{"path": 0, "file URL": 1}[kind]; len(mirrors) != want {
				t.Fatalf("mirrors %v, want %d", mirrors, want)
			}
			leftovers, _ := filepath.Glob(filepath.Join(cache, ".new-*"))
			if len(leftovers) != 0 {
				t.Fatalf("leftover temporary mirrors %v", leftovers)
			}
		})
	}
}

// TestWorkTreePath accepts a non-bare repository's path.
func TestWorkTreePath(t *testing.T) {
	t.Parallel()
	w := setup(t)
	sha := w.pushBranch("ACME-1")
	f := New("")
	repo := forge.Repo{URL: w.work, DefaultBranch: "main"}
	pr := w.ensure(f, repo, "ACME-1")
	if pr.HeadSHA != sha {
		t.Fatalf("%+v", pr)
	}
	if st := w.state(f, repo, pr); flags(st) != "pushed,open" {
		t.Fatalf("%+v", st)
	}
}

// TestExactBranchNames: ls-remote matches ref tails; team/ACME-1 is not ACME-1.
func TestExactBranchNames(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.pushBranch("team/ACME-1")
	w.pushBranch("x/main")
	f := New(t.TempDir())
	for _, url := range []string{w.bare, "file://" + w.bare} {
		repo := forge.Repo{URL: url, DefaultBranch: "main"}
		if _, err := f.EnsurePullRequest(context.Background(), repo, "ACME-1", "", ""); !errors.Is(err, forge.ErrBranchNotPushed) {
			t.Fatalf("%s: %v, want ErrBranchNotPushed", url, err)
		}
		pr := w.ensure(f, repo, "team/ACME-1")
		if st := w.state(f, repo, pr); flags(st) != "pushed,open" {
			t.Fatalf("%s: %+v", url, st)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.pushBranch("ok")
	f := New(t.TempDir())
	ctx := context.Background()
	repo := forge.Repo{URL: w.bare, DefaultBranch: "main"}
	for _, b := range []string{"", "-x", "--upload-pack=touch /tmp/x", "a..b", "a b", "a~1", "a^", "a:b", "@{-1}", "x@{u}",
		"HEAD", "a.lock", "/a", "a/", "a//b", ".a", "a\x00b", "a\nb", "main", strings.Repeat("a", 256)} {
		if _, err := f.EnsurePullRequest(ctx, repo, b, "", ""); !errors.Is(err, forge.ErrInvalidBranch) {
			t.Errorf("EnsurePullRequest(%q): %v, want ErrInvalidBranch", b, err)
		}
		if _, err := f.State(ctx, repo, forge.PullRequest{Branch: b, Base: "main"}); !errors.Is(err, forge.ErrInvalidBranch) {
			t.Errorf("State(%q): %v, want ErrInvalidBranch", b, err)
		}
	}
	for _, base := range []string{"", "-main", "a..b"} {
		if _, err := f.EnsurePullRequest(ctx, forge.Repo{URL: w.bare, DefaultBranch: base}, "ok", "", ""); !errors.Is(err, forge.ErrInvalidBranch) {
			t.Errorf("default branch %q: %v, want ErrInvalidBranch", base, err)
		}
	}
	for _, url := range []string{"", "-x", "--upload-pack=touch", "/a\nb"} {
		if _, err := f.EnsurePullRequest(ctx, forge.Repo{URL: url, DefaultBranch: "main"}, "ok", "", ""); err == nil || errors.Is(err, forge.ErrBranchNotPushed) {
			t.Errorf("URL %q: %v, want an error", url, err)
		}
	}
	for _, sha := range []string{"-x", "HEAD", "main", "abc", strings.Repeat("A", 40)} {
		if _, err := f.State(ctx, repo, forge.PullRequest{Branch: "ok", Base: "main", HeadSHA: sha}); err == nil || !strings.Contains(err.Error(), "not a commit id") {
			t.Errorf("head %q: %v, want not a commit id", sha, err)
		}
	}
	// Names git accepts pass.
	for _, b := range []string{"ok", "feature/ACME-1", "ACME-1_fix.2"} {
		if err := f.check(w.bare, b, "main"); err != nil {
			t.Errorf("branch %q: %v", b, err)
		}
	}
}

// TestGitExecutesNothing: repository settings that would make git run a
// command — stored directly in the database, past the validation of the
// API — are refused before git runs; and were one to reach git, git itself
// refuses the transport (GIT_ALLOW_PROTOCOL). No marker file appears.
func TestGitExecutesNothing(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.pushBranch("ok")
	f := New(t.TempDir())
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "pwned")
	urls := []string{
		"ext::sh -c touch% " + marker,
		"ext::sh -c 'touch " + marker + "'",
		"-oProxyCommand=touch " + marker,
		"--upload-pack=touch " + marker,
		"ssh://-oProxyCommand=touch%20" + marker + "/x",
		"ssh://-oProxyCommand=touch/x",
		"-oProxyCommand=touch " + marker + ":x",
		"git@-oProxyCommand=touch:x",
		"fd::0",
		"git://127.0.0.1:1/x",
	}
	for _, u := range urls {
		repo := forge.Repo{URL: u, DefaultBranch: "main"}
		if _, err := f.EnsurePullRequest(ctx, repo, "ok", "", ""); err == nil || !strings.Contains(err.Error(), "location is refused") {
			t.Errorf("EnsurePullRequest on %q: %v, want the location refused", u, err)
		}
		if _, err := f.State(ctx, repo, forge.PullRequest{Branch: "ok", Base: "main"}); err == nil || !strings.Contains(err.Error(), "location is refused") {
			t.Errorf("State on %q: %v, want the location refused", u, err)
		}
	}
	// A default branch or branch that git would read as an option.
	for _, b := range []string{"--upload-pack=touch " + marker, "-u" + marker} {
		if _, err := f.EnsurePullRequest(ctx, forge.Repo{URL: w.bare, DefaultBranch: b}, "ok", "", ""); !errors.Is(err, forge.ErrInvalidBranch) {
			t.Errorf("default branch %q: %v", b, err)
		}
		if _, err := f.State(ctx, forge.Repo{URL: w.bare, DefaultBranch: "main"}, forge.PullRequest{Branch: b}); !errors.Is(err, forge.ErrInvalidBranch) {
			t.Errorf("branch %q: %v", b, err)
		}
	}
	// One layer down, past check: git refuses the transports itself.
	for _, u := range []string{"ext::sh -c touch% " + marker, "fd::0", "git://127.0.0.1:1/x"} {
		if _, err := f.lsRemote(ctx, u, "main"); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("git ls-remote %q: %v, want the transport not allowed", u, err)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("git executed a command: %s exists (%v)", marker, err)
	}
	// The same marker is created when the command does run: the check is
	// not vacuous.
	if out, err := exec.Command("sh", "-c", "touch "+marker).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal(err)
	}
}

func TestMissingDefaultBranch(t *testing.T) {
	t.Parallel()
	w := setup(t)
	w.pushBranch("ACME-1")
	f := New(t.TempDir())
	for _, url := range []string{w.bare, "file://" + w.bare} {
		repo := forge.Repo{URL: url, DefaultBranch: "trunk"}
		if _, err := f.EnsurePullRequest(context.Background(), repo, "ACME-1", "", ""); err == nil || !strings.Contains(err.Error(), "default branch trunk does not exist") {
			t.Errorf("%s: EnsurePullRequest: %v", url, err)
		}
		if _, err := f.State(context.Background(), repo, forge.PullRequest{Branch: "ACME-1", Base: "trunk"}); err == nil || !strings.Contains(err.Error(), "default branch trunk does not exist") {
			t.Errorf("%s: State: %v", url, err)
		}
	}
}

func TestGitErrors(t *testing.T) {
	t.Parallel()
	needGit(t)
	ctx := context.Background()
	f := New(t.TempDir())
	missing := filepath.Join(t.TempDir(), "nope.git")
	_, err := f.EnsurePullRequest(ctx, forge.Repo{URL: missing, DefaultBranch: "main"}, "ACME-1", "", "")
	if err == nil || !strings.Contains(err.Error(), "git ls-remote") || !strings.Contains(err.Error(), "does not appear to be a git repository") {
		t.Fatalf("missing repository: %v, want git's stderr", err)
	}
	// Credentials in a URL never reach an error.
	_, err = f.State(ctx, forge.Repo{URL: "http://ballet:s3cret-token@127.0.0.1:1/r.git", DefaultBranch: "main"}, forge.PullRequest{Branch: "ACME-1"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable URL: %v, want an error without the password", err)
	}
	// git's stderr (which a remote partly writes) reaches reports and logs
	// printable: no ESC sequences, no invalid UTF-8.
	_, err = f.git(ctx, "check-ref-format", "--branch", "a\x1b[2J\xffb")
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x00") || !utf8.ValidString(err.Error()) || !strings.Contains(err.Error(), "a?[2J?b") {
		t.Fatalf("error with control characters: %q", err)
	}
	// A URL needs the cache for its mirror.
	if _, err := New("").contains(ctx, "file:///x.git", "main", strings.Repeat("a", 40), strings.Repeat("b", 40)); err == nil || !strings.Contains(err.Error(), "cache directory") {
		t.Fatalf("no cache: %v", err)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	f := New("")
	if f.CanMerge() {
		t.Fatal("plain git claims it can merge")
	}
	err := f.Merge(context.Background(), forge.Repo{URL: "/x", DefaultBranch: "main"}, forge.PullRequest{Branch: "b", Base: "main"})
	if !errors.Is(err, forge.ErrCannotMerge) {
		t.Fatalf("Merge: %v, want ErrCannotMerge", err)
	}
}

// TestTimeout: a git that hangs is killed after Forge.Timeout. The hanging
// git is this test binary (TestMain), so no sleep binary is needed.
func TestTimeout(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(hangEnv, "1") // the forge passes its environment on to git
	f := &Forge{Git: self, Timeout: 200 * time.Millisecond}
	// The error proves the command was ended by the timeout (a git that
	// ran to its end would have exited 1, see TestMain), and Run returns
	// only once the process is gone.
	_, err = f.EnsurePullRequest(context.Background(), forge.Repo{URL: "/x.git", DefaultBranch: "main"}, "ACME-1", "", "")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("%v, want a timeout", err)
	}
	// A cancelled caller's context ends the command too, as a cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.EnsurePullRequest(ctx, forge.Repo{URL: "/x.git", DefaultBranch: "main"}, "ACME-1", "", ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}

// TestConcurrentMirror: polls of one URL share its mirror safely.
func TestConcurrentMirror(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var shas []string
	for _, b := range []string{"a", "b", "c", "d"} {
		shas = append(shas, w.pushBranch(b))
	}
	w.git("push", "--quiet", "origin", "b:main")
	f := New(filepath.Join(w.dir, "cache"))
	repo := forge.Repo{URL: "file://" + w.bare, DefaultBranch: "main"}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := []string{"a", "b", "c", "d"}[i%4]
			st, err := f.State(context.Background(), repo, forge.PullRequest{Branch: b, Base: "main", HeadSHA: shas[i%4]})
			if err == nil && st.Merged != (b == "b") {
				err = errors.New(b + ": merged is " + flags(st))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestIsLocal(t *testing.T) {
	t.Parallel()
	for loc, want := range map[string]bool{
		"/srv/git/r.git": true, "r.git": true, "./a:b": true, "../r": true,
		"file:///srv/r.git": false, "http://127.0.0.1:3000/o/r.git": false, "ssh://git@host/r.git": false,
		"git@host:o/r.git": false, "host:r.git": false,
	} {
		if got := isLocal(loc); got != want {
			t.Errorf("isLocal(%q) = %v, want %v", loc, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://user:tok@host/r.git": "https://xxxxx@host/r.git",
		"https://tok@host/r.git":      "https://xxxxx@host/r.git",
		"ssh://git:pw@host/r.git":     "ssh://git:xxxxx@host/r.git",
		"ssh://git@host/r.git":        "ssh://git@host/r.git",
		"git@host:o/r.git":            "git@host:o/r.git",
		"/srv/r.git":                  "/srv/r.git",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGitTimeout: one git command is bounded at two minutes unless the
// forge says otherwise.
func TestGitTimeout(t *testing.T) {
	if got := (&Forge{}).runner().Timeout; got != 2*time.Minute {
		t.Errorf("default timeout %v, want 2m", got)
	}
	if got := (&Forge{Timeout: time.Second}).runner().Timeout; got != time.Second {
		t.Errorf("timeout %v, want the forge's 1s", got)
	}
}
