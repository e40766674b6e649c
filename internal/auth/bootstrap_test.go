package auth

import (
	"errors"
	"io/fs"
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

// failingFile fails the one step of writing the token file it is told to.
type failingFile struct {
	tokenFile
	fail   string
	closed *bool
}

var errInjected = errors.New("injected failure")

func (f failingFile) Chmod(m fs.FileMode) error {
	if f.fail == "chmod" {
		return errInjected
	}
	return f.tokenFile.Chmod(m)
}

func (f failingFile) WriteString(s string) (int, error) {
	if f.fail == "write" {
		return 0, errInjected
	}
	return f.tokenFile.WriteString(s)
}

func (f failingFile) Sync() error {
	if f.fail == "sync" {
		return errInjected
	}
	return f.tokenFile.Sync()
}

func (f failingFile) Close() error {
	*f.closed = true
	err := f.tokenFile.Close()
	if f.fail == "close" {
		return errInjected
	}
	return err
}

// TestATokenFileThatCannotBeWrittenWholeIsNotUsed: when setting the
// temporary file's mode, writing, syncing or closing it fails, Bootstrap
// says so, leaves no token file behind (a later start generates a whole
// one) and closes the temporary file.
func TestATokenFileThatCannotBeWrittenWholeIsNotUsed(t *testing.T) {
	t.Setenv(EnvBootstrapToken, "")
	for _, step := range []string{"chmod", "write", "sync", "close"} {
		file := filepath.Join(t.TempDir(), "bootstrap-token")
		closed := false
		old := createTemp
		createTemp = func(dir, pattern string) (tokenFile, error) {
			f, err := os.CreateTemp(dir, pattern)
			return failingFile{tokenFile: f, fail: step, closed: &closed}, err
		}
		tok, _, err := Bootstrap("", file)
		createTemp = old
		if !errors.Is(err, errInjected) || tok != "" {
			t.Errorf("the %s failing: %q, %v; want the failure", step, tok, err)
		}
		if _, serr := os.Stat(file); !errors.Is(serr, fs.ErrNotExist) {
			t.Errorf("the %s failing left a token file: %v", step, serr)
		}
		if !closed {
			t.Errorf("the %s failing left the temporary file open", step)
		}
	}
}
