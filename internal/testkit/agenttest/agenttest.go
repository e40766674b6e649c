// Package agenttest gives tests the real agent CLIs, claude-code and
// opencode, at the pinned versions scripts/agent-clis.sh installs into a
// cache folder (make test runs it and passes the paths in BALLET_CLAUDE
// and BALLET_OPENCODE).
//
// Each CLI is needed on its own: a test of claude-code does not need
// opencode. A missing or wrong CLI fails the test under CI=true, naming how
// to install it, and is a counted skip otherwise (package parts); the tests
// that need the CLIs are also skipped when a developer asks with
// BALLET_SKIP_AGENTS=1.
package agenttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/parts"
)

// The pinned versions.
const (
	ClaudeVersion   = "2.1.332"
	OpenCodeVersion = "1.18.33"
)

// SkipEnv is the environment variable a developer sets to 1 to skip every
// test that needs an agent CLI.
const SkipEnv = "BALLET_SKIP_AGENTS"

// CLI is one pinned agent CLI.
type CLI struct {
	Name    string // "claude-code" or "opencode"
	Package string // its npm package
	Version string
	Bin     string // the executable's name in node_modules/.bin
	Env     string // the environment variable that names the executable
}

// The two CLIs.
var (
	ClaudeCLI   = CLI{Name: "claude-code", Package: "@anthropic-ai/claude-code", Version: ClaudeVersion, Bin: "claude", Env: "BALLET_CLAUDE"}
	OpenCodeCLI = CLI{Name: "opencode", Package: "opencode-ai", Version: OpenCodeVersion, Bin: "opencode", Env: "BALLET_OPENCODE"}
)

// ByName returns the CLI of an adapter's name (claude-code, opencode).
func ByName(name string) CLI {
	if name == OpenCodeCLI.Name {
		return OpenCodeCLI
	}
	return ClaudeCLI
}

// Present returns the CLI's executable when it is there at the pinned
// version and BALLET_SKIP_AGENTS is not 1, else "", without ending any
// test: for a harness that offers whatever CLIs exist while each test
// needs its own with Path.
func (c CLI) Present() string {
	if os.Getenv(SkipEnv) == "1" {
		return ""
	}
	path, err := c.find()
	if err != nil {
		return ""
	}
	return path
}

// Claude returns the path of the claude executable (see CLI.Path).
func Claude(t testing.TB) string { t.Helper(); return ClaudeCLI.Path(t) }

// OpenCode returns the path of the opencode executable (see CLI.Path).
func OpenCode(t testing.TB) string { t.Helper(); return OpenCodeCLI.Path(t) }

// DefaultPath is where scripts/agent-clis.sh installs the CLI:
// ${XDG_CACHE_HOME:-~/.cache}/ballet/agent-clis/NAME-VERSION/node_modules/.bin/BIN.
func (c CLI) DefaultPath() (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the home folder: %w", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "ballet", "agent-clis", c.Name+"-"+c.Version, "node_modules", ".bin", c.Bin), nil
}

// Path returns the CLI's executable: $ENV if set, else DefaultPath. It
// checks once per process that it runs and reports the pinned version.
// When BALLET_SKIP_AGENTS=1 the test is skipped; otherwise a missing or
// wrong CLI fails it under CI=true and skips it elsewhere, counted under
// the CLI's own name (package parts).
func (c CLI) Path(t testing.TB) string {
	t.Helper()
	parts.Asked(t, c.Name, SkipEnv)
	path, err := c.find()
	if err != nil {
		parts.Missing(t, c.Name, fmt.Errorf("agenttest: %w", err))
	}
	return path
}

var checked sync.Map // path → error (nil when it is the pinned version)

func (c CLI) find() (string, error) {
	path := os.Getenv(c.Env)
	if path == "" {
		p, err := c.DefaultPath()
		if err != nil {
			return "", err
		}
		path = p
	}
	if v, ok := checked.Load(path); ok {
		if v != nil {
			return "", v.(error)
		}
		return path, nil
	}
	err := c.check(path)
	if err != nil {
		checked.Store(path, err)
		return "", err
	}
	checked.Store(path, nil)
	return path, nil
}

// check runs PATH --version and looks for the pinned version.
func (c CLI) check(path string) error {
	install := fmt.Sprintf("install it with scripts/agent-clis.sh (npm install --prefix … %s@%s; make test does it), "+
		"set %s to its executable, or skip the tests that need it with %s=1", c.Package, c.Version, c.Env, SkipEnv)
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s %s: no executable at %s: %s", c.Name, c.Version, path, install)
	}
	home, err := os.MkdirTemp("", "agenttest-home")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a speed claim
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "XDG_DATA_HOME=" + home,
		"XDG_CACHE_HOME=" + home, "XDG_STATE_HOME=" + home}
	cmd.Stdin = nil // /dev/null: an open stdin hangs opencode
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s %s: %s --version: %v: %s", c.Name, c.Version, path, err, install)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, c.Version+" ") && got != c.Version {
		return fmt.Errorf("%s: %s --version says %q, want %s: %s", c.Name, path, got, c.Version, install)
	}
	return nil
}
