//go:build linux

package runner_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runproto"
)

// The stage's checkpoint is deleted only after a run that succeeded with
// an outcome; every other ending keeps it (issue 24: a failed run that
// deleted its checkpoint lost the paid work). Cancel, no report, the
// watchdog and the runner's SIGKILL are in session_test.go, the runner's
// SIGTERM in TestDrain; these are the endings left.

const checkpointRef = "refs/ballet/checkpoints/ACME-1/implement"

// seedCheckpoint pushes a checkpoint of stage implement of ACME-1 holding
// seed.txt, made on main's head as a session of the stage would have left
// it, and returns its commit.
func (r *remote) seedCheckpoint() string {
	r.t.Helper()
	writeFile(r.t, filepath.Join(r.work, "seed.txt"), "seed\n")
	git(r.t, r.work, "add", "seed.txt")
	git(r.t, r.work, "commit", "--quiet", "-m", "checkpoint of an earlier session")
	git(r.t, r.work, "push", "--quiet", r.url, "HEAD:"+checkpointRef)
	git(r.t, r.work, "reset", "--quiet", "--hard", "HEAD^")
	return r.ref(checkpointRef)
}

// refuseBranches makes the remote refuse every push to a ballet/ branch
// (a protected branch, a full disk on the forge): the checkpoint's ref is
// still taken.
func (r *remote) refuseBranches() {
	r.t.Helper()
	hook := "#!/bin/sh\nwhile read old new ref; do\n  case \"$ref\" in refs/heads/ballet/*) echo \"refused: $ref\" >&2; exit 1;; esac\ndone\n"
	if err := os.WriteFile(filepath.Join(r.url, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		r.t.Fatal(err)
	}
}

// A session that reports done but whose work cannot be pushed: Core
// finishes the run failed although it has an outcome, and the work stays
// in the stage's checkpoint (a runner that dropped the checkpoint of any
// run with an outcome, failed or not, loses it).
func TestCheckpointKeptWhenTheReportedWorkIsNotPushed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.remote.refuseBranches()
	w.start(w.options())
	run := w.core.enqueue(w.session(fakemodel.Marker("report-done", "content=unpushed")))
	got := w.core.over(run)
	f := got.Finishes[0]
	if got.Status != runproto.StatusFailed || got.Outcome != "done" || f.ExitStatus == 0 ||
		!strings.Contains(f.Error, "the agent's work could not be pushed to ballet/ACME-1") {
		t.Fatalf("run %s, outcome %q, finish %+v", got.Status, got.Outcome, f)
	}
	if c := w.remote.ref("refs/heads/ballet/ACME-1"); c != "" {
		t.Fatalf("the branch was pushed (%s): the remote's refusal proves nothing", c)
	}
	c := w.remote.ref(checkpointRef)
	if c == "" || w.remote.show(c, "hello.txt") != "unpushed\n" {
		t.Errorf("the checkpoint %q does not keep the work of the failed run", c)
	}
	if pids := sessionProcs(run.ID); len(pids) > 0 {
		t.Errorf("processes of the session run on: %v", pids)
	}
}

// A session past its stage's timeout is stopped, its run fails saying so,
// nothing of it runs on, and the stage's checkpoint (made by an earlier
// session, restored into this one) is still there.
func TestCheckpointKeptPastTheStageTimeout(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	seed := w.remote.seedCheckpoint()
	w.start(w.options())
	ss := w.session(fakemodel.Marker("slow-work", "steps=3", "sleep=600"))
	ss.Stage.TimeoutSeconds = 20
	run := w.core.enqueue(ss)
	got := w.core.over(run)
	f := got.Finishes[0]
	if got.Status != runproto.StatusFailed || f.ExitStatus == 0 || !strings.Contains(f.Error, "past the stage's timeout") {
		t.Fatalf("run %s, finish %+v", got.Status, f)
	}
	wantUsage(t, f.Usage, w.servedFirst()) // every token served before the timeout
	c := w.remote.ref(checkpointRef)
	if c == "" || w.remote.show(c, "seed.txt") != "seed\n" {
		t.Errorf("the checkpoint %q (was %s) is lost after a timeout", c, seed)
	}
	if c := w.remote.ref("refs/heads/ballet/ACME-1"); c != "" {
		t.Errorf("the branch was pushed: %s", c)
	}
	if pids := sessionProcs(run.ID); len(pids) > 0 {
		t.Errorf("processes of the session run on: %v", pids)
	}
}

// The runner process gets a real SIGTERM mid-session: it drains, and when
// its drain time runs out it stops the session — the CLI, its shell and
// the shell's sleep, all gone — finishes the run failed saying why, keeps
// the work in the stage's checkpoint, reports every token the model served
// and exits 0. (SIGKILL:
// TestRunnerKilledMidWork.)
func TestRunnerSIGTERMMidWork(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	o := w.options()
	o.Config.Drain.Duration = time.Second
	child := w.startChild(o)
	run := w.core.enqueue(w.session(fakemodel.Marker("slow-work", "steps=3", "sleep=600")))
	w.midWork(run)
	// The shell has written work.txt; its sleep (the CLI's grandchild)
	// follows.
	waitFor(t, "the session's shell command to sleep", func() bool {
		return slices.ContainsFunc(sessionProcs(run.ID), func(p string) bool { return strings.HasSuffix(p, "(sleep)") })
	})
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the runner exited with %v after SIGTERM; want 0", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the runner did not exit after SIGTERM")
	}
	got := w.core.snapshot(run)
	if len(got.Finishes) != 1 || got.Status != runproto.StatusInterrupted || got.Finishes[0].Interrupted != runproto.ReasonRunnerDrain ||
		!strings.Contains(got.Finishes[0].Error, "the runner was stopped and its drain time (1s) ran out") {
		t.Fatalf("run %s, finishes %+v", got.Status, got.Finishes)
	}
	wantUsage(t, got.Finishes[0].Usage, w.servedFirst()) // the spend of a drained-out session counts
	if pids := sessionProcs(run.ID); len(pids) > 0 {
		t.Errorf("processes of the session outlive the runner: %v", pids)
	}
	c := w.remote.ref(checkpointRef)
	if c == "" || w.remote.show(c, "work.txt") != "step 1\n" {
		t.Errorf("the checkpoint %q does not keep the work of the stopped session", c)
	}
}
