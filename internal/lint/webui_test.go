package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeWebuiCheckFailsOnAStaleBuild runs the Makefile's webui-check in a
// scratch git repository with a fake npm whose build writes the given
// files into internal/webui/dist: the check passes only when the rebuilt
// assets equal the committed ones, and .ci/run runs it.
func TestMakeWebuiCheckFailsOnAStaleBuild(t *testing.T) {
	for _, c := range []struct {
		name   string
		build  map[string]string // what the fake build writes into dist
		wantOK bool
	}{
		{name: "fresh", build: map[string]string{"index.html": "page\n", "assets/index-1.js": "js\n"}, wantOK: true},
		{name: "changed", build: map[string]string{"index.html": "page\n", "assets/index-1.js": "other js\n"}},
		{name: "new chunk", build: map[string]string{"index.html": "page\n", "assets/index-1.js": "js\n", "assets/page-2.js": "p\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runWebuiCheck(t, c.build)
			if (err == nil) != c.wantOK {
				t.Fatalf("make webui-check: %v, want success %v\n%s", err, c.wantOK, out)
			}
			if !c.wantOK && !strings.Contains(out, "make webui") {
				t.Fatalf("the failure does not say what to do:\n%s", out)
			}
			if c.wantOK && !strings.Contains(out, "size.mjs 250") {
				t.Fatalf("the check did not measure the first page against its budget:\n%s", out)
			}
		})
	}
	ci, err := os.ReadFile(filepath.Join(root(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\nmake webui-check\n") {
		t.Error(".ci/run does not run make webui-check")
	}
}

func runWebuiCheck(t *testing.T, build map[string]string) (string, error) {
	t.Helper()
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required: %v", tool, err)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", string(makefile), 0o644)
	write("web/package.json", "{}\n", 0o644)
	write("internal/webui/dist/index.html", "page\n", 0o644)
	write("internal/webui/dist/assets/index-1.js", "js\n", 0o644)
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "committed build")
	// The fake build empties dist (as vite's emptyOutDir does) and writes it again.
	var script strings.Builder
	script.WriteString("#!/bin/sh\ncase \"$1\" in ci) exit 0;; esac\nrm -rf ../internal/webui/dist\n")
	for rel, content := range build {
		p := "../internal/webui/dist/" + rel
		script.WriteString("mkdir -p \"$(dirname " + p + ")\"\nprintf '%s' '" + content + "' > " + p + "\n")
	}
	write("bin/npm", script.String(), 0o755)
	write("bin/node", "#!/bin/sh\necho \"node $*\"\n", 0o755)
	cmd := exec.Command("make", "--no-print-directory", "webui-check")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}
