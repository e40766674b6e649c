package proc

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRecordNamesTheRunningGroup: while a session runs, its state file
// names this runner and the session's command and process group (what
// Sweep kills after the runner died, even processes that dropped the
// marker); the file is gone once the session is over.
func TestRecordNamesTheRunningGroup(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	out := make(lines, 10)
	s := start(t, Spec{ID: "recorded-1", Env: []string{helperEnv + "=hang"}, OnLine: out.onLine, StateDir: state})
	out.next(t, "ready")
	path := filepath.Join(state, "recorded-1.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	start, err := selfStart()
	if err != nil {
		t.Fatal(err)
	}
	want := record{ID: "recorded-1", PID: s.PID(), PGID: s.PID(), RunnerPID: os.Getpid(), RunnerStart: start}
	if r != want {
		t.Errorf("record %+v, want %+v", r, want)
	}
	s.Stop()
	wait(t, s)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record outlived the session: %v", err)
	}
}
