package proc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSweepHalfWrittenRecords: a record a dead runner was still writing
// (.new-…) is removed once it is older than a minute, when no runner can
// still be writing it; a fresh one is left to its runner. Neither is an
// error, nor a swept session.
func TestSweepHalfWrittenRecords(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	old, fresh := filepath.Join(state, ".new-old"), filepath.Join(state, ".new-fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte(`{"id":`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	swept, err := Sweep(state)
	if err != nil || len(swept) != 0 {
		t.Fatalf("swept %+v, %v; want nothing swept and no error", swept, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the record half-written two minutes ago is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the record being written now was removed: %v", err)
	}
}

// TestSweepReadsRecordsOnly: files of the state folder that are not
// records (another name) are left alone without a complaint; a record that
// cannot be read is reported, and the other records are still swept.
func TestSweepReadsRecordsOnly(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	notes := filepath.Join(state, "notes.txt")
	if err := os.WriteFile(notes, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(state, "broken.json"), 0o700); err != nil { // read fails: a folder
		t.Fatal(err)
	}
	b, _ := json.Marshal(record{ID: "dead-2"}) // RunnerPID 0: its runner is gone
	if err := os.WriteFile(filepath.Join(state, "dead-2.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	swept, err := Sweep(state)
	if err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("error %v, want the unreadable broken.json reported", err)
	}
	if len(swept) != 1 || swept[0].ID != "dead-2" {
		t.Errorf("swept %+v, want dead-2 swept despite the unreadable record", swept)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("a file that is no record was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "dead-2.json")); !os.IsNotExist(err) {
		t.Errorf("the swept record is still there: %v", err)
	}

	// Without the unreadable record, the stray file is no error at all.
	if err := os.Remove(filepath.Join(state, "broken.json")); err != nil {
		t.Fatal(err)
	}
	if swept, err := Sweep(state); err != nil || len(swept) != 0 {
		t.Errorf("swept %+v, %v; want nothing and no error beside a stray file", swept, err)
	}
}

// TestRecordInANewStateFolder: a state folder that does not exist yet is
// made (private to the runner) by the first session that records itself.
func TestRecordInANewStateFolder(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state", "sessions")
	out := make(lines, 10)
	s := start(t, Spec{ID: "new-folder", Env: []string{helperEnv + "=hang"}, OnLine: out.onLine, StateDir: state})
	out.next(t, "ready")
	fi, err := os.Stat(filepath.Join(state, "new-folder.json"))
	if err != nil {
		t.Fatalf("no record in the new state folder: %v", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("record mode %v, want it private", fi.Mode())
	}
	s.Stop()
	wait(t, s)
}
