package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServe starts `ballet serve` in dir and returns it once it serves,
// with its address.
func startServe(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--config", "ballet.toml")
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addrRE := regexp.MustCompile(`msg="core serving" addr=(\S+)`)
	lines := bufio.NewScanner(stderr)
	var logged bytes.Buffer
	for lines.Scan() {
		logged.WriteString(lines.Text() + "\n")
		if m := addrRE.FindStringSubmatch(lines.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return cmd, m[1]
		}
	}
	t.Fatalf("no address logged:\n%s", logged.String())
	return nil, ""
}

func writeConfig(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A second `ballet serve` on the same SQLite file refuses to start, naming
// the file and the process that holds it; the first keeps serving.
func TestSecondServeOnOneDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeConfig(t, dir, "[http]\naddr = \"127.0.0.1:0\"\n")
	first, addr := startServe(t, dir)
	second := exec.Command(binary, "serve", "--config", "ballet.toml")
	second.Dir = dir
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &out
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- second.Wait() }()
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("second serve: %v, want exit 1\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = second.Process.Kill()
		<-exited
		t.Fatalf("the second serve on the same database kept running:\n%s", out.String())
	}
	stderr := out.String()
	for _, want := range []string{"data/core.db is in use", "process " + strconv.Itoa(first.Process.Pid), "data/core.db.lock"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, stderr)
		}
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the first serve stopped answering: %d", resp.StatusCode)
	}
}

// A busy port fails before the database and the bootstrap token are
// created: nothing is left behind.
func TestBusyPortCreatesNothing(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	writeConfig(t, dir, "[http]\naddr = \""+l.Addr().String()+"\"\n")
	_, stderr, code := runBinary(t, dir, "", "serve", "--config", "ballet.toml")
	if code != 1 || !strings.Contains(stderr, "(http.addr)") || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("a busy port left data/ behind (%v)", err)
	}
}

// A bad address or duration is refused by `ballet config` and by `ballet
// serve` before anything is created, naming the key.
func TestBadConfigValuesNameTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, want string }{
		{"[http]\naddr = \"127.0.0.1:99999\"\n", `http.addr: "127.0.0.1:99999" has port "99999": a port is a number from 0 to 65535`},
		{"[http]\naddr = \"localhost\"\n", `http.addr: "localhost" is not host:port`},
		{"[jobs]\nlease = \"5x\"\n", `jobs.lease: "5x" is not a duration`},
		{"[http]\nread_timeout = 5\n", `http.read_timeout: "5" is not a duration`},
	} {
		dir := t.TempDir()
		writeConfig(t, dir, tc.toml)
		for _, cmd := range []string{"config", "serve"} {
			_, stderr, code := runBinary(t, dir, "", cmd, "--config", "ballet.toml")
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("ballet %s with %q: exit %d, %q; want exit 2 and %q", cmd, tc.toml, code, stderr, tc.want)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
			t.Fatalf("a bad config left data/ behind (%v)", err)
		}
	}
}

// A data folder Core may not write says "permission denied" with the
// path. As root (who may write anywhere) the binary runs as nobody.
func TestUnwritableDataFolder(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ballet-perm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "data"), 0o755); _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, "[http]\naddr = \"127.0.0.1:0\"\n")
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o555); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--config", "ballet.toml")
	cmd.Dir = dir
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1:\n%s", err, out)
	}
	if !strings.Contains(string(out), "permission denied: data/core.db.lock") {
		t.Fatalf("the error does not say permission denied with the path:\n%s", out)
	}
}

// --help and -h on the binary and on every command exit 0 and explain the
// command, its flags and its environment variables.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"ballet serve", "ballet config", "ballet version", "ballet dev fake-model", "BALLET_BOOTSTRAP_TOKEN", "BALLET_TOKEN"}},
		{[]string{"-h"}, []string{"ballet serve"}},
		{[]string{"help"}, []string{"ballet events follow"}},
		{[]string{"help", "serve"}, []string{"Usage: ballet serve", "-config FILE"}},
		{[]string{"serve", "--help"}, []string{"Usage: ballet serve", "-config FILE", "BALLET_BOOTSTRAP_TOKEN", "Exit status"}},
		{[]string{"serve", "-h"}, []string{"Usage: ballet serve"}},
		{[]string{"config", "--help"}, []string{"Usage: ballet config", "-config FILE", "name the"}},
		{[]string{"pipeline", "--help"}, []string{"ballet pipeline validate FILE", "--template"}},
		{[]string{"pipeline", "validate", "--help"}, []string{"ballet pipeline validate FILE"}},
		{[]string{"pipeline", "render", "-h"}, []string{"ballet pipeline render", "-template"}},
		{[]string{"pipeline", "publish", "--help"}, []string{"ballet pipeline publish --project KEY", "BALLET_TOKEN", "-project", "-version"}},
		{[]string{"events", "--help"}, []string{"ballet events follow", "BALLET_TOKEN"}},
		{[]string{"events", "follow", "--help"}, []string{"ballet events follow", "BALLET_TOKEN", "-project", "-after"}},
		{[]string{"version", "--help"}, []string{"Usage: ballet version", "commit"}},
		{[]string{"--help"}, []string{"ballet backup --to FILE", "ballet restore --from FILE"}},
		{[]string{"backup", "--help"}, []string{"Usage: ballet backup --to FILE", "VACUUM INTO", "-knowledge", "/db/backup", "Exit status"}},
		{[]string{"restore", "--help"}, []string{"Usage: ballet restore --from FILE", ".lock", "refuses", "-from FILE", "Exit status"}},
		{[]string{"dev", "--help"}, []string{"ballet dev fake-model", "[[ballet-scenario:NAME"}},
		{[]string{"dev", "fake-model", "--help"}, []string{"ballet dev fake-model", "-addr", "-scenario", "-dump", "[[ballet-scenario:report-done]]"}},
	} {
		stdout, stderr, code := runBinary(t, "", "", tc.args...)
		if code != 0 || stderr != "" {
			t.Errorf("ballet %s: exit %d, stderr %q", strings.Join(tc.args, " "), code, stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("ballet %s does not mention %q:\n%s", strings.Join(tc.args, " "), w, stdout)
			}
		}
	}
	// A bad flag is still a usage error, pointing at the help.
	if _, stderr, code := runBinary(t, "", "", "serve", "--nope"); code != 2 || !strings.Contains(stderr, "ballet serve --help") {
		t.Errorf("bad flag: exit %d, %q", code, stderr)
	}
}

// `ballet version` prints the module and the commit Go stamped into the
// binary (or says it has none: Go stamps no commit in a git worktree or
// with -buildvcs=false).
func TestVersion(t *testing.T) {
	t.Parallel()
	stdout, _, code := runBinary(t, "", "", "version")
	if code != 0 || !strings.Contains(stdout, "module  github.com/ballet/ballet\n") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	want := "commit  unknown"
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			want = "commit  " + s.Value
		}
	}
	if !strings.Contains(stdout, want) || !strings.Contains(stdout, bi.GoVersion) {
		t.Fatalf("version does not say %q and %s:\n%s", want, bi.GoVersion, stdout)
	}
	// With a stamped commit, as a build from a git checkout has.
	out := versionText(&debug.BuildInfo{Main: debug.Module{Path: "github.com/ballet/ballet", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}}})
	for _, w := range []string{"ballet v1.2.3\n", "module  github.com/ballet/ballet\n", "commit  0123abc (with uncommitted changes)\n", "date    2025-01-02T03:04:05Z\n"} {
		if !strings.Contains(out, w) {
			t.Fatalf("version text lacks %q:\n%s", w, out)
		}
	}
}
