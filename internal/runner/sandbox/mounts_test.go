package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrapMountsEachPathOnce: a path named twice the same way — a
// read-only path listed twice, or once through a symbolic link — is
// mounted once.
func TestWrapMountsEachPathOnce(t *testing.T) {
	t.Parallel()
	d := mkdirs(t, t.TempDir(), "ws", "home", "cli")
	link := filepath.Join(t.TempDir(), "cli-link")
	if err := os.Symlink(d["cli"], link); err != nil {
		t.Fatal(err)
	}
	cmd, err := Sandbox{Bwrap: "/bin/sh"}.Wrap(Session{
		Command:   Command{Path: "claude"},
		Workspace: d["ws"], Home: d["home"], ReadOnly: []string{d["cli"], link, d["cli"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i+2 < len(cmd.Args); i++ {
		if cmd.Args[i] == "--ro-bind" && cmd.Args[i+1] == d["cli"] && cmd.Args[i+2] == d["cli"] {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%s mounted %d times: %q", d["cli"], n, cmd.Args)
	}
}
