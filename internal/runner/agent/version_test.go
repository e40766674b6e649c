package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cli writes an executable shell script standing in for an agent CLI.
func cli(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cli")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// Version is the first word the CLI prints for --version, at most 100
// bytes; it runs in a fresh home of its own (its working folder, every XDG
// folder, TMPDIR) with the runner's PATH and nothing else of its
// environment, and the home is gone afterwards.
func TestVersionRunsInACleanHome(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "seen")
	t.Setenv("ANTHROPIC_API_KEY", "sk-must-not-reach")
	v, err := Version(t.Context(), cli(t, `[ "$1" = --version ] || exit 9
{ pwd; env; } > `+seen+`
echo "2.1.332 (Claude Code)"`))
	if err != nil || v != "2.1.332" {
		t.Fatalf("Version = %q, %v; want 2.1.332", v, err)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	home := lines[0]
	var env []string
	for _, kv := range lines[1:] {
		if k, _, _ := strings.Cut(kv, "="); k != "PWD" && k != "SHLVL" && k != "_" && k != "OLDPWD" { // the shell's own
			env = append(env, kv)
		}
	}
	slices.Sort(env)
	want := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + home, "XDG_CACHE_HOME=" + home,
		"XDG_CONFIG_HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_STATE_HOME=" + home}
	if !slices.Equal(env, want) {
		t.Errorf("the CLI's environment %q, want %q", env, want)
	}
	if !strings.Contains(home, "ballet-version-") {
		t.Errorf("it ran in %s, not a home of its own", home)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the home %s is left: %v", home, err)
	}

	long := strings.Repeat("9", 150)
	if v, err := Version(t.Context(), cli(t, "echo "+long)); err != nil || v != long[:100] {
		t.Errorf("Version of a long word = %q, %v; want its first 100 bytes", v, err)
	}
}

// Version fails when the CLI is missing, fails, or prints nothing; one
// that hangs is stopped with its children when the context ends.
func TestVersionFailures(t *testing.T) {
	for name, path := range map[string]string{
		"missing": filepath.Join(t.TempDir(), "none"),
		"fails":   cli(t, "echo 1.0; exit 1"),
		"nothing": cli(t, "echo '   '"),
	} {
		if v, err := Version(t.Context(), path); err == nil {
			t.Errorf("%s: Version = %q, want an error", name, v)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	begun := time.Now()
	if v, err := Version(ctx, cli(t, "sleep 60 & echo $! > "+pidFile+"; wait")); err == nil {
		t.Errorf("a hanging CLI: Version = %q, want an error", v)
	}
	if d := time.Since(begun); d > 30*time.Second {
		t.Errorf("a hanging CLI held Version for %s", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child := strings.TrimSpace(string(b))
	for deadline := time.Now().Add(10 * time.Second); ; {
		st, err := os.ReadFile("/proc/" + child + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break // gone, or dead and not yet reaped
		}
		if time.Now().After(deadline) {
			t.Errorf("the hanging CLI's child %s outlived Version", child)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}
