package workspace

import (
	"context"
	"path/filepath"
	"testing"
)

// TestACheckpointAfterItsDropPushesAgain: once the stage's checkpoint was
// dropped from the remote, the workspace no longer takes the remote to
// hold its tree: the next checkpoint, even of an unchanged working tree,
// pushes it again (else that work would be in no checkpoint at all).
func TestACheckpointAfterItsDropPushesAgain(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	ctx := context.Background()
	w := checkpointed(t, &Manager{Dir: t.TempDir()}, r, "run-1", func(dir string) {
		writeFile(t, filepath.Join(dir, "a.txt"), "work\n")
	})
	const ref = "refs/ballet/checkpoints/ACME-1/implement"
	if r.ref(ref) == "" {
		t.Fatal("no checkpoint on the remote")
	}
	if err := w.DropCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.ref(ref); got != "" {
		t.Fatalf("the checkpoint is still there: %s", got)
	}
	c, err := w.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Pushed || r.ref(ref) != c.Commit {
		t.Errorf("checkpoint after the drop: %+v, remote at %q; want the unchanged work pushed again", c, r.ref(ref))
	}
	if r.show(c.Commit, "a.txt") != "work" {
		t.Error("the checkpoint does not hold the work")
	}
}
