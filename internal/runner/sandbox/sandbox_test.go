package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/runner/proc"
)

// mkdirs creates folders under root and returns their real paths by name.
func mkdirs(t *testing.T, root string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = r
	}
	return out
}

// index is the position of the first occurrence of seq in args, -1 if none.
func index(args []string, seq ...string) int {
	for i := 0; i+len(seq) <= len(args); i++ {
		if slices.Equal(args[i:i+len(seq)], seq) {
			return i
		}
	}
	return -1
}

// TestWrapOrder: parents are mounted before their children, so a bind
// below /tmp or below a hidden folder survives the tmpfs over it; hidden
// folders are made read-only after the binds; the command follows "--".
func TestWrapOrder(t *testing.T) {
	t.Parallel()
	d := mkdirs(t, t.TempDir(), "work", "work/runs/a/ws", "work/runs/a/home", "cli", "cli/secrets", "core")
	cfg := filepath.Join(d["cli"], "..", "runner.toml")
	if err := os.WriteFile(cfg, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ = filepath.EvalSymlinks(cfg)
	sb := Sandbox{Bwrap: "/bin/sh", Hide: []string{d["cli/secrets"], d["work"], cfg, d["core"], "/nonexistent/ballet"}, Private: filepath.Join(d["work"], "private")}
	cmd, err := sb.Wrap(Session{
		Command:   Command{Path: "claude", Args: []string{"-p", "hi"}, Env: []string{"HOME=" + d["work/runs/a/home"]}, Dir: "/elsewhere"},
		Workspace: d["work/runs/a/ws"], Home: d["work/runs/a/home"], ReadOnly: []string{d["cli"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := cmd.Args
	if cmd.Path != "/bin/sh" || cmd.Dir != "/" || !slices.Equal(cmd.Env, []string{"HOME=" + d["work/runs/a/home"]}) {
		t.Fatalf("command %+v", cmd)
	}
	mask := filepath.Join(d["work"], "private", maskName)
	at := func(seq ...string) int {
		t.Helper()
		i := index(a, seq...)
		if i < 0 {
			t.Fatalf("%q not in %q", seq, a)
		}
		return i
	}
	tmp := at("--tmpfs", "/tmp")
	hideWork := at("--tmpfs", d["work"])
	ws := at("--bind", d["work/runs/a/ws"], d["work/runs/a/ws"])
	home := at("--bind", d["work/runs/a/home"], d["work/runs/a/home"])
	cli := at("--ro-bind", d["cli"], d["cli"])
	remount := at("--remount-ro", d["work"])
	at("--ro-bind", mask, cfg)
	at("--tmpfs", d["core"])
	at("--remount-ro", d["core"])
	at("--cap-drop", "ALL")
	at("--die-with-parent")
	at("--chdir", d["work/runs/a/ws"])
	secrets := at("--tmpfs", d["cli/secrets"])
	if !(tmp < hideWork && hideWork < ws && hideWork < home && tmp < cli && cli < secrets && ws < remount && home < remount) {
		t.Errorf("mount order wrong: %q", a)
	}
	// The handshake's script runs first, then the session's command.
	if i := at("--"); !slices.Equal(a[i+1:], []string{"/bin/sh", "-c", proc.HandshakeScript, "ballet-session", "claude", "-p", "hi"}) {
		t.Errorf("command after --: %q", a[i+1:])
	}
	if index(a, "--tmpfs", d["work"]+"/private") >= 0 && index(a, "--tmpfs", d["work"]+"/private") < hideWork {
		t.Errorf("the private folder hidden before its parent: %q", a)
	}
	if strings.Contains(strings.Join(a, " "), "nonexistent") {
		t.Errorf("a missing path was mounted: %q", a)
	}
	if fi, err := os.Stat(mask); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0 {
		t.Errorf("mask file: %v %v", fi, err)
	}
}

// TestWrapRefuses: what cannot be sandboxed as asked is an error.
func TestWrapRefuses(t *testing.T) {
	t.Parallel()
	d := mkdirs(t, t.TempDir(), "ws", "home", "hidden")
	file := filepath.Join(d["hidden"], "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := Session{Command: Command{Path: "x"}, Workspace: d["ws"], Home: d["home"]}
	cases := []struct {
		name string
		sb   Sandbox
		sess Session
		want string
	}{
		{"bad mode", Sandbox{Mode: "docker"}, ok, `mode "docker"`},
		{"no command", Sandbox{Bwrap: "/bin/sh"}, Session{Workspace: d["ws"], Home: d["home"]}, "no command"},
		{"no workspace", Sandbox{Bwrap: "/bin/sh"}, Session{Command: Command{Path: "x"}, Home: d["home"]}, "no workspace"},
		{"missing home", Sandbox{Bwrap: "/bin/sh"}, Session{Command: Command{Path: "x"}, Workspace: d["ws"], Home: d["home"] + "/none"}, "home"},
		{"relative", Sandbox{Bwrap: "/bin/sh", Hide: []string{"data"}}, ok, "not an absolute path"},
		{"hide root", Sandbox{Bwrap: "/bin/sh", Hide: []string{"/"}}, ok, "root of the file system"},
		{"hide the workspace", Sandbox{Bwrap: "/bin/sh", Hide: []string{d["ws"]}}, ok, "both hidden and shown"},
		{"hide a file without a private folder", Sandbox{Bwrap: "/bin/sh", Hide: []string{file}}, ok, "Sandbox.Private"},
		{"no bwrap", Sandbox{Bwrap: filepath.Join(d["hidden"], "bwrap")}, ok, "apt-get install bubblewrap"},
	}
	for _, c := range cases {
		if _, err := c.sb.Wrap(c.sess); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if err := (Sandbox{Bwrap: filepath.Join(d["hidden"], "bwrap")}).Check(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "apt-get install bubblewrap") || !strings.Contains(err.Error(), `sandbox = "none"`) {
		t.Errorf("Check without bwrap: %v", err)
	}
}

// TestNone: sandbox "none" runs the command as it is, in the workspace.
func TestNone(t *testing.T) {
	t.Parallel()
	in := Session{Command: Command{Path: "claude", Args: []string{"-p"}, Env: []string{"A=1"}, Dir: "/x"}, Workspace: "/w", Home: "/h"}
	got, err := Sandbox{Mode: ModeNone, Hide: []string{"/etc"}}.Wrap(in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Path != "claude" || !slices.Equal(got.Args, []string{"-p"}) || !slices.Equal(got.Env, []string{"A=1"}) || got.Dir != "/w" {
		t.Fatalf("%+v", got)
	}
	if err := (Sandbox{Mode: ModeNone, Bwrap: "/missing"}).Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}
