package auth

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentBootstrapAgrees: instances starting at once on a data
// folder without a token all get the one token written, and none reads a
// half-written file.
func TestConcurrentBootstrapAgrees(t *testing.T) {
	t.Setenv(EnvBootstrapToken, "")
	for round := range 200 {
		file := filepath.Join(t.TempDir(), "data", "bootstrap-token")
		const n = 8
		tokens, errs := make([]string, n), make([]error, n)
		generated := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { tokens[i], generated[i], errs[i] = Bootstrap("", file) })
		}
		wg.Wait()
		gen := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: %v", round, errs[i])
			}
			if tokens[i] != tokens[0] {
				t.Fatalf("round %d: instances got different tokens", round)
			}
			if generated[i] {
				gen++
			}
		}
		if gen != 1 {
			t.Fatalf("round %d: %d instances say they generated the token, want 1", round, gen)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: token file %v, %v; want mode 0600", round, fi, err)
		}
		left, _ := os.ReadDir(filepath.Dir(file))
		if len(left) != 1 {
			t.Fatalf("round %d: %d files in the data folder, want only the token", round, len(left))
		}
	}
}
