package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeTestInstallsTheAgentCLIs runs the repository's Makefile with a
// fake go, gofmt and scripts: make test installs the pinned agent CLIs
// (scripts/agent-clis.sh) and hands their paths to the tests, fails before
// any test runs when the install fails, keeps paths the caller gives, and
// skips the install only when asked (BALLET_SKIP_AGENTS=1); make run never
// installs them.
func TestMakeTestInstallsTheAgentCLIs(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is required (apt-get install make): %v", err)
	}
	makefile, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, target string
		env          []string
		installFails bool
		wantOK       bool
		wantInstall  bool
		wantGo       string // a line the fake go logged for go test (or go run)
	}{
		{name: "install fails", target: "test", installFails: true, wantInstall: true},
		{name: "install works", target: "test", wantOK: true, wantInstall: true,
			wantGo: "go test claude=/cache/claude opencode=/cache/opencode skip="},
		{name: "skip asked", target: "test", env: []string{"BALLET_SKIP_AGENTS=1"}, installFails: true, wantOK: true,
			wantGo: "go test claude= opencode= skip=1"},
		{name: "paths given", target: "test", env: []string{"BALLET_CLAUDE=/my/claude", "BALLET_OPENCODE=/my/opencode"},
			installFails: true, wantOK: true, wantGo: "go test claude=/my/claude opencode=/my/opencode skip="},
		{name: "one path given", target: "test", env: []string{"BALLET_CLAUDE=/my/claude"}, wantOK: true, wantInstall: true,
			wantGo: "go test claude=/my/claude opencode=/cache/opencode skip="},
		{name: "run", target: "run", installFails: true, wantOK: true, wantGo: "go run claude= opencode= skip="},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			logPath := filepath.Join(dir, "calls.log")
			install := "echo agent-clis.sh >> " + logPath + "\necho \"BALLET_CLAUDE='/cache/claude'\"\necho \"BALLET_OPENCODE='/cache/opencode'\"\n"
			if c.installFails {
				install = "echo agent-clis.sh >> " + logPath + "\necho 'npm failed' >&2\nexit 1\n"
			}
			files := map[string]string{
				"Makefile":              string(makefile),
				"scripts/agent-clis.sh": "#!/bin/sh\n" + install,
				"scripts/rqlited.sh":    "#!/bin/sh\necho /built/rqlited\n",
				"bin/gofmt":             "#!/bin/sh\n",
				"bin/go": "#!/bin/sh\ncase \"$1\" in test|run) echo \"go $1 claude=${BALLET_CLAUDE:-} opencode=${BALLET_OPENCODE:-} skip=${BALLET_SKIP_AGENTS:-}\" >> " +
					logPath + ";; esac\n",
			}
			for name, content := range files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("make", "--no-print-directory", c.target)
			cmd.Dir = dir
			for _, kv := range os.Environ() {
				switch strings.SplitN(kv, "=", 2)[0] {
				case "PATH", "BALLET_CLAUDE", "BALLET_OPENCODE", "BALLET_SKIP_AGENTS", "BALLET_RQLITED", "MAKEFLAGS", "MAKELEVEL", "MFLAGS":
				default:
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			calls, _ := os.ReadFile(logPath)
			log := string(calls)
			if (err == nil) != c.wantOK {
				t.Errorf("make %s: %v, want success %v\n%s", c.target, err, c.wantOK, out)
			}
			if ran := strings.Contains(log, "agent-clis.sh\n"); ran != c.wantInstall {
				t.Errorf("scripts/agent-clis.sh ran: %v, want %v; calls:\n%s", ran, c.wantInstall, log)
			}
			if c.wantGo != "" && !strings.Contains(log, c.wantGo+"\n") {
				t.Errorf("calls lack %q:\n%s\n%s", c.wantGo, log, out)
			}
			if !c.wantOK {
				if strings.Contains(log, "go test") {
					t.Errorf("tests ran although the install failed:\n%s", log)
				}
				if !strings.Contains(string(out), "BALLET_SKIP_AGENTS=1") {
					t.Errorf("the failure does not say how to skip:\n%s", out)
				}
			}
		})
	}
}
