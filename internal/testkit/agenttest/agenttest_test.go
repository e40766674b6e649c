package agenttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/parts"
)

// fakeTB records how Path ended a test: Fatalf and Skipf stop it like the
// real ones do (here by a panic that outcome recovers).
type fakeTB struct {
	testing.TB
	fatal, skip string
}

type stopped struct{}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "TestFake" }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// outcome runs Path on a fake test: the path, or how the test ended.
func outcome(c CLI) (path string, f *fakeTB) {
	f = &fakeTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	return c.Path(f), f
}

// script writes an executable that prints out for --version.
func script(t *testing.T, dir, out string) string {
	t.Helper()
	p := filepath.Join(dir, "cli")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The CLI is found where the environment variable says, or in the cache
// folder scripts/agent-clis.sh installs into; it must print its pinned
// version. A missing or wrong one fails the test with how to install it;
// only BALLET_SKIP_AGENTS=1 skips.
func TestPath(t *testing.T) {
	parts.Aside(t) // the skips below are provoked, not missing parts
	cli := CLI{Name: "demo", Package: "demo-pkg", Version: "1.2.3", Bin: "demo", Env: "AGENTTEST_DEMO"}
	dir := t.TempDir()
	for _, c := range []struct {
		name      string
		env       map[string]string
		wantPath  string
		wantFatal string
		wantSkip  string
	}{
		{name: "env", env: map[string]string{"AGENTTEST_DEMO": script(t, t.TempDir(), "1.2.3 (Demo)")},
			wantPath: "cli"},
		{name: "plain version", env: map[string]string{"AGENTTEST_DEMO": script(t, t.TempDir(), "1.2.3")},
			wantPath: "cli"},
		{name: "wrong version", env: map[string]string{"AGENTTEST_DEMO": script(t, t.TempDir(), "1.2.30")},
			wantFatal: `--version says "1.2.30", want 1.2.3`},
		{name: "missing", env: map[string]string{"AGENTTEST_DEMO": filepath.Join(dir, "nothing")},
			wantFatal: "no executable at " + filepath.Join(dir, "nothing") + ": install it with scripts/agent-clis.sh"},
		{name: "missing, not CI", env: map[string]string{"AGENTTEST_DEMO": filepath.Join(dir, "nothing"), "CI": ""},
			wantSkip: "demo is missing"},
		{name: "cache", env: map[string]string{"AGENTTEST_DEMO": "", "XDG_CACHE_HOME": dir},
			wantFatal: "no executable at " + filepath.Join(dir, "ballet", "agent-clis", "demo-1.2.3", "node_modules", ".bin", "demo")},
		{name: "skip asked", env: map[string]string{"AGENTTEST_DEMO": filepath.Join(dir, "nothing"), SkipEnv: "1"},
			wantSkip: "BALLET_SKIP_AGENTS=1"},
		{name: "skip misspelt", env: map[string]string{SkipEnv: "yes"},
			wantFatal: `BALLET_SKIP_AGENTS="yes": set it to 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(SkipEnv, "")
			t.Setenv("CI", "true")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			path, f := outcome(cli)
			switch {
			case c.wantPath != "" && (filepath.Base(path) != c.wantPath || f.fatal != "" || f.skip != ""):
				t.Errorf("path %q, fatal %q, skip %q; want the CLI", path, f.fatal, f.skip)
			case c.wantFatal != "" && !strings.Contains(f.fatal, c.wantFatal):
				t.Errorf("fatal %q, want %q (path %q, skip %q)", f.fatal, c.wantFatal, path, f.skip)
			case c.wantSkip != "" && !strings.Contains(f.skip, c.wantSkip):
				t.Errorf("skip %q, want %q (path %q, fatal %q)", f.skip, c.wantSkip, path, f.fatal)
			}
		})
	}
}

// The pinned CLIs' cache paths are what scripts/agent-clis.sh prints.
func TestDefaultPathsMatchTheScript(t *testing.T) {
	b, err := os.ReadFile("../../../scripts/agent-clis.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []CLI{ClaudeCLI, OpenCodeCLI} {
		want := fmt.Sprintf("install %s %s %s %s", c.Name, c.Package, c.Version, c.Bin)
		if !strings.Contains(string(b), want) {
			t.Errorf("scripts/agent-clis.sh does not say %q", want)
		}
		if !strings.Contains(string(b), c.Env+"=") {
			t.Errorf("scripts/agent-clis.sh does not print %s", c.Env)
		}
	}
}
