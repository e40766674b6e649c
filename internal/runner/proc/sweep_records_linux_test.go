package proc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSweepRefusesForeignRecords: a state file that is not a session's
// record — its id is not its file's name, or not a session id — is
// reported and left alone, even when it names a dead runner.
func TestSweepRefusesForeignRecords(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]record{
		"a.json":   {ID: "b"},
		"a b.json": {ID: "a b"},
	} {
		state := t.TempDir()
		b, _ := json.Marshal(r) // RunnerPID 0: no runner alive
		path := filepath.Join(state, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		swept, err := Sweep(state)
		if err == nil || len(swept) != 0 {
			t.Errorf("%s: swept %+v, %v; want it refused", name, swept, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: removed: %v", name, err)
		}
	}
}
