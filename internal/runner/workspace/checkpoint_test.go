package workspace

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/runner/proc"
)

// hangGuard bounds a wait on a real process: a hang becomes a failure. It
// is no speed limit.
const hangGuard = time.Minute

// agentState is what a checkpoint must leave alone: the agent's index (its
// bytes), its status, and the list of files in its workspace.
func agentState(t *testing.T, dir string) string {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		files = append(files, strings.TrimPrefix(p, dir))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("index %x\nstatus %s\nfiles %s", sha256.Sum256(idx), run(t, dir, "status", "--porcelain"), strings.Join(files, " "))
}

// TestCheckpointKilledMidWork: an agent (a shell) works in steps; the
// runner checkpoints after the first two, then the agent is killed in the
// middle of the third. A new session of the same stage gets the second
// checkpoint's files back as uncommitted changes on the branch head, and
// is told so; no checkpoint touched the agent's index or files. When the
// stage ends, DropCheckpoint deletes the ref.
func TestCheckpointKilledMidWork(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	w := prepare(t, m, spec(r, "run-1", "implement"))
	fifo := filepath.Join(t.TempDir(), "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Each step ends with a line, then waits for the next "go". A read may
	// open the FIFO while the previous writer has not closed it yet and get
	// its end of file: it opens it again (with set -e a bare read exited 1).
	script := `set -e
wait_go() { until read x < "$GO"; do :; done; }
echo one > a.txt; git add a.txt; echo two >> doc.txt
echo step1; wait_go
echo three >> a.txt; echo new > src/b.go; rm README; mkdir -p deep/er; echo x > deep/er/c.txt
echo step2; wait_go
echo lost > lost.txt
echo step3; wait_go
echo never > never.txt`
	lines := make(chan string, 10)
	agent, err := proc.Start(context.Background(), proc.Spec{
		ID: "agent-" + filepath.Base(t.TempDir()), Path: "/bin/sh", Args: []string{"-c", script}, Dir: w.Dir,
		Env:    []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.Home, "GO=" + fifo},
		OnLine: func(b []byte, _ bool) { lines <- string(b) },
	})
	if err != nil {
		t.Fatal(err)
	}
	step := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("agent said %q, want %q", got, want)
			}
		case <-agent.Done():
			t.Fatalf("the agent ended: %+v", agent.Wait())
		case <-time.After(hangGuard):
			t.Fatalf("no %s", want)
		}
	}
	next := func() { // the agent opens the FIFO to read from it: this waits for that
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- os.WriteFile(fifo, []byte("go\n"), 0) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(hangGuard):
			t.Fatal("the agent does not read")
		}
	}
	checkpoint := func() string {
		t.Helper()
		before := agentState(t, w.Dir)
		c, err := w.Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !c.Pushed || r.ref("refs/ballet/checkpoints/ACME-1/implement") != c.Commit {
			t.Fatalf("%+v", c)
		}
		if after := agentState(t, w.Dir); after != before {
			t.Fatalf("the checkpoint touched the agent's workspace:\nbefore %s\nafter  %s", before, after)
		}
		return c.Commit
	}

	step("step1")
	first := checkpoint()
	if c, err := w.Checkpoint(context.Background()); err != nil || c.Pushed {
		t.Errorf("nothing changed, yet: %+v %v", c, err)
	}
	next()
	step("step2")
	second := checkpoint()
	if second == first {
		t.Fatal("the second checkpoint is the first")
	}
	next()
	step("step3")
	agent.Stop() // killed mid-work
	if res := agent.Wait(); res.Reason != proc.Cancelled {
		t.Fatalf("%+v", res)
	}

	w2 := prepare(t, m, spec(r, "run-2", "implement"))
	if w2.Restored == nil || w2.Restored.Commit != second || w2.Restored.Merged || w2.Base != w.Base {
		t.Fatalf("restored %+v on %s", w2.Restored, w2.Base)
	}
	for name, want := range map[string]string{"a.txt": "one\nthree\n", "doc.txt": "line 1\nline 2\nline 3\ntwo\n", "src/b.go": "new\n", "deep/er/c.txt": "x\n"} {
		if got := readFile(t, filepath.Join(w2.Dir, name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	for _, gone := range []string{"README", "lost.txt", "never.txt"} {
		if _, err := os.Stat(filepath.Join(w2.Dir, gone)); err == nil {
			t.Errorf("%s is there", gone)
		}
	}
	if head := run(t, w2.Dir, "rev-parse", "HEAD"); head != w.Base {
		t.Errorf("HEAD %s, want the branch head %s", head, w.Base)
	}
	if staged := run(t, w2.Dir, "diff", "--cached", "--name-only"); staged != "" {
		t.Errorf("staged: %s; the index should be the branch head's", staged)
	}
	var status []string
	for _, l := range strings.Split(run(t, w2.Dir, "status", "--porcelain", "--untracked-files=all"), "\n") {
		status = append(status, strings.ReplaceAll(strings.TrimSpace(l), " ", "_"))
	}
	slices.Sort(status)
	if want := []string{"??_a.txt", "??_deep/er/c.txt", "??_src/b.go", "D_README", "M_doc.txt"}; !slices.Equal(status, want) {
		t.Errorf("status %q, want %q (uncommitted changes)", status, want)
	}
	// The restored session publishes on the branch head.
	p, err := w2.Publish(context.Background(), "done")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.files(p.Commit); !slices.Equal(got, []string{"a.txt", "deep/er/c.txt", "doc.txt", "src/a.go", "src/b.go"}) {
		t.Errorf("published %q", got)
	}
	if err := w2.DropCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.ref("refs/ballet/checkpoints/ACME-1/implement"); got != "" {
		t.Errorf("the checkpoint is still there: %s", got)
	}
	// Other stages' checkpoints are their own.
	w3 := prepare(t, m, spec(r, "run-3", "review"))
	if w3.Restored != nil {
		t.Errorf("review restored implement's checkpoint: %+v", w3.Restored)
	}
}

// checkpointed makes a session of stage that leaves a checkpoint with
// changes, and returns it.
func checkpointed(t *testing.T, m *Manager, r *remote, runID string, change func(dir string)) *Workspace {
	t.Helper()
	w := prepare(t, m, spec(r, runID, "implement"))
	change(w.Dir)
	if c, err := w.Checkpoint(context.Background()); err != nil || !c.Pushed {
		t.Fatalf("%+v %v", c, err)
	}
	return w
}

// TestRestoreOnMovedBranch: when the branch moved after the checkpoint,
// its changes are merged onto the new head; clashing changes are left with
// conflict markers, and the files are named.
func TestRestoreOnMovedBranch(t *testing.T) {
	t.Parallel()
	for _, clash := range []bool{false, true} {
		r := newRemote(t)
		run(t, r.work, "checkout", "--quiet", "-b", "ballet/ACME-1")
		run(t, r.work, "push", "--quiet", r.url, "ballet/ACME-1")
		m := &Manager{Dir: t.TempDir()}
		w := checkpointed(t, m, r, "run-1", func(dir string) {
			writeFile(t, filepath.Join(dir, "doc.txt"), "line 1 by the agent\nline 2\nline 3\n")
			writeFile(t, filepath.Join(dir, "agent.txt"), "agent\n")
		})
		// A person pushes to the branch meanwhile.
		if clash {
			r.write("doc.txt", "line 1 by a person\nline 2\nline 3\n")
		} else {
			r.write("doc.txt", "line 1\nline 2\nline 3 by a person\n")
		}
		head := r.commit("a person")
		run(t, r.work, "push", "--quiet", r.url, "ballet/ACME-1")

		w2 := prepare(t, m, spec(r, "run-2", "implement"))
		if w2.Base != head || w2.Restored == nil || !w2.Restored.Merged || w2.Restored.Commit == "" {
			t.Fatalf("clash %v: %+v, restored %+v", clash, w2, w2.Restored)
		}
		doc := readFile(t, filepath.Join(w2.Dir, "doc.txt"))
		if readFile(t, filepath.Join(w2.Dir, "agent.txt")) != "agent\n" {
			t.Errorf("clash %v: agent.txt not restored", clash)
		}
		if !clash {
			if doc != "line 1 by the agent\nline 2\nline 3 by a person\n" || len(w2.Restored.Conflicts) != 0 {
				t.Errorf("merged: %q, conflicts %q", doc, w2.Restored.Conflicts)
			}
		} else if !strings.Contains(doc, "<<<<<<<") || !strings.Contains(doc, "by the agent") || !strings.Contains(doc, "by a person") ||
			!slices.Equal(w2.Restored.Conflicts, []string{"doc.txt"}) {
			t.Errorf("conflict: %q, conflicts %q", doc, w2.Restored.Conflicts)
		}
		if run(t, w2.Dir, "rev-parse", "HEAD") != head {
			t.Error("HEAD is not the branch head")
		}
		// The merged state is not on the remote yet: the next checkpoint
		// pushes it even if the agent does nothing.
		if c, err := w2.Checkpoint(context.Background()); err != nil || !c.Pushed {
			t.Errorf("clash %v: %+v %v", clash, c, err)
		}
		_ = w
	}
}

// TestRestoreOnBranch: a checkpoint made on the branch's head comes back
// exactly when the branch did not move.
func TestRestoreOnBranch(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	run(t, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/ballet/ACME-1")
	m := &Manager{Dir: t.TempDir()}
	w := checkpointed(t, m, r, "run-1", func(dir string) { writeFile(t, filepath.Join(dir, "doc.txt"), "agent\n") })
	w2 := prepare(t, m, spec(r, "run-2", "implement"))
	if !w2.Continued || w2.Base != w.Base || w2.Restored == nil || w2.Restored.Merged {
		t.Fatalf("%+v restored %+v", w2, w2.Restored)
	}
	if readFile(t, filepath.Join(w2.Dir, "doc.txt")) != "agent\n" {
		t.Error("not restored")
	}
	// Nothing changed since: the first checkpoint pushes nothing.
	if c, err := w2.Checkpoint(context.Background()); err != nil || c.Pushed {
		t.Errorf("%+v %v", c, err)
	}
}

// TestRestoreNeverPushedBranch: a branch never pushed, whose checkpoint was
// made on an older main: the session starts where the checkpoint was made,
// so it comes back exactly.
func TestRestoreNeverPushedBranch(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	w := checkpointed(t, m, r, "run-1", func(dir string) { writeFile(t, filepath.Join(dir, "doc.txt"), "agent\n") })
	r.write("doc.txt", "main moved\n")
	r.commit("main moved")
	run(t, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/main")
	w2 := prepare(t, m, spec(r, "run-2", "implement"))
	if w2.Base != w.Base || w2.Restored == nil || w2.Restored.Merged || w2.Continued {
		t.Fatalf("%+v restored %+v, want base %s", w2, w2.Restored, w.Base)
	}
	if readFile(t, filepath.Join(w2.Dir, "doc.txt")) != "agent\n" {
		t.Error("not restored exactly")
	}
}

// TestRestoreUnrelated: a checkpoint that cannot be merged at all (the
// branch was replaced by an unrelated history) is kept under another ref,
// never lost, and the session starts without it.
func TestRestoreUnrelated(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	m := &Manager{Dir: t.TempDir()}
	checkpointed(t, m, r, "run-1", func(dir string) { writeFile(t, filepath.Join(dir, "doc.txt"), "agent\n") })
	ckpt := r.ref("refs/ballet/checkpoints/ACME-1/implement")
	run(t, r.work, "checkout", "--quiet", "--orphan", "other")
	r.write("unrelated.txt", "x\n")
	run(t, r.work, "rm", "--quiet", "--cached", "README", "doc.txt", "src/a.go")
	head := r.commit("unrelated root")
	run(t, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/ballet/ACME-1")

	w2 := prepare(t, m, spec(r, "run-2", "implement"))
	if w2.Base != head || w2.Restored == nil || w2.Restored.Kept == "" || w2.Restored.Commit != ckpt {
		t.Fatalf("%+v restored %+v", w2, w2.Restored)
	}
	if got := r.ref(w2.Restored.Kept); got != ckpt {
		t.Errorf("kept at %s: %s, want %s", w2.Restored.Kept, got, ckpt)
	}
}

// TestCheckpointEvery: checkpoints run on the clock's interval.
func TestCheckpointEvery(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan CheckpointResult, 10)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.CheckpointEvery(ctx, clk, 5*time.Minute, func(c CheckpointResult, err error) {
			if err != nil {
				t.Error(err)
			}
			results <- c
		})
	}()
	writeFile(t, filepath.Join(w.Dir, "a.txt"), "1\n")
	clk.BlockUntil(1)
	clk.Advance(5 * time.Minute)
	if c := <-results; !c.Pushed {
		t.Errorf("first: %+v", c)
	}
	clk.BlockUntil(1)
	clk.Advance(5 * time.Minute)
	if c := <-results; c.Pushed {
		t.Errorf("unchanged, yet pushed: %+v", c)
	}
	cancel()
	<-stopped
}

// TestCheckpointEveryStopsCleanly: the periodic checkpoints are stopped
// (the session ended) while one runs git on the runner's index. That
// checkpoint runs to its end — killed, git would leave index.lock behind —
// and the session's publish works. The stand-in git takes the index's
// lock while it waits to be let go, as a git busy writing the index does.
func TestCheckpointEveryStopsCleanly(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	dir := t.TempDir()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	gate, busy := filepath.Join(dir, "gate"), filepath.Join(dir, "busy")
	slow := filepath.Join(dir, "slow-git")
	writeFile(t, slow, fmt.Sprintf(`#!/bin/sh
case " $* " in
*" add --all "*)
	if [ -n "$GIT_INDEX_FILE" ] && [ ! -e %[1]q ]; then
		: > "$GIT_INDEX_FILE.lock"
		: > %[2]q
		while [ ! -e %[1]q ]; do sleep 0.05; done
		rm -f "$GIT_INDEX_FILE.lock"
	fi ;;
esac
exec %[3]q "$@"
`, gate, busy, real))
	if err := os.Chmod(slow, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Dir: t.TempDir()}
	w := prepare(t, m, spec(r, "run-1", "implement"))
	m.Git = slow
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.CheckpointEvery(ctx, clk, time.Minute, nil)
	}()
	writeFile(t, filepath.Join(w.Dir, "a.txt"), "1\n")
	clk.BlockUntil(1)
	clk.Advance(time.Minute)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling a real process
		if _, err := os.Stat(busy); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint's git add did not start (hang guard)")
		}
	}
	cancel() // the session ended mid-checkpoint
	writeFile(t, gate, "")
	<-stopped
	p, err := w.Publish(context.Background(), "Done.")
	if err != nil || !p.Pushed {
		t.Fatalf("publish after the checkpoints stopped: %+v, %v", p, err)
	}
}

// BenchmarkCheckpoint: one checkpoint (snapshot, commit, push to a bare
// repository on disk) after one file changed, in a small and a larger
// workspace.
func BenchmarkCheckpoint(b *testing.B) {
	for _, size := range []struct {
		name  string
		files int
		bytes int
	}{{"10files", 10, 1 << 10}, {"5000files_50MB", 5000, 10 << 10}} {
		b.Run(size.name, func(b *testing.B) {
			r := newRemote(b)
			for i := range size.files {
				r.write(fmt.Sprintf("pkg%d/file%d.txt", i%50, i), strings.Repeat(fmt.Sprintf("%d\n", i), size.bytes/4))
			}
			r.commit("a larger tree")
			run(b, r.work, "push", "--quiet", r.url, "HEAD:refs/heads/main")
			w := prepare(b, &Manager{Dir: b.TempDir()}, spec(r, "run-1", "implement"))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				writeFile(b, filepath.Join(w.Dir, "changing.txt"), fmt.Sprint(i))
				if c, err := w.Checkpoint(context.Background()); err != nil || !c.Pushed {
					b.Fatal(c, err)
				}
			}
		})
	}
}
