package lint

import (
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
	for _, c := range []struct {
		name, target string
		env          []string
		installFails bool
		wantOK       bool
		wantInstall  bool
		wantGo       string // the start of a line the fake go logged for go test (or go run)
	}{
		{name: "install fails", target: "test", installFails: true, wantInstall: true},
		{name: "install works", target: "test", wantOK: true, wantInstall: true,
			wantGo: "claude=/cache/claude opencode=/cache/opencode skip_agents="},
		{name: "skip asked", target: "test", env: []string{"BALLET_SKIP_AGENTS=1"}, installFails: true, wantOK: true,
			wantGo: "claude= opencode= skip_agents=1"},
		{name: "paths given", target: "test", env: []string{"BALLET_CLAUDE=/my/claude", "BALLET_OPENCODE=/my/opencode"},
			installFails: true, wantOK: true, wantGo: "claude=/my/claude opencode=/my/opencode skip_agents="},
		{name: "one path given", target: "test", env: []string{"BALLET_CLAUDE=/my/claude"}, wantOK: true, wantInstall: true,
			wantGo: "claude=/my/claude opencode=/cache/opencode skip_agents="},
		{name: "run", target: "run", installFails: true, wantOK: true, wantGo: "claude= opencode= skip_agents="},
	} {
		t.Run(c.name, func(t *testing.T) {
			var scripts fakeScripts
			if c.installFails {
				scripts.agents = "echo 'npm failed' >&2\nexit 1\n"
			}
			out, log, err := runMake(t, c.target, scripts, c.env)
			if (err == nil) != c.wantOK {
				t.Errorf("make %s: %v, want success %v\n%s", c.target, err, c.wantOK, out)
			}
			if ran := strings.Contains(log, "agent-clis.sh\n"); ran != c.wantInstall {
				t.Errorf("scripts/agent-clis.sh ran: %v, want %v; calls:\n%s", ran, c.wantInstall, log)
			}
			if c.wantGo != "" && !strings.Contains(log, " "+c.wantGo+" gitea=") {
				t.Errorf("calls lack %q:\n%s\n%s", c.wantGo, log, out)
			}
			if !c.wantOK {
				if strings.Contains(log, "go test") {
					t.Errorf("tests ran although the install failed:\n%s", log)
				}
				if !strings.Contains(out, "BALLET_SKIP_AGENTS=1") {
					t.Errorf("the failure does not say how to skip:\n%s", out)
				}
			}
		})
	}
}
