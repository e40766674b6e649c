package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ballet-bin")
	if err != nil {
		panic(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // TestUnwritableDataFolder runs it as another user
		panic(err)
	}
	binary = filepath.Join(dir, "ballet")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestFreshServeCreatesDatabaseAndAnswers starts the real binary in an empty
// folder: it creates data/core.db, answers /healthz, /readyz and /metrics,
// and stops cleanly on SIGTERM.
func TestFreshServeCreatesDatabaseAndAnswers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Only the port differs from the defaults, so that tests can run side
	// by side.
	if err := os.WriteFile(filepath.Join(dir, "ballet.toml"), []byte("[http]\naddr = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--config", "ballet.toml")
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addrRE := regexp.MustCompile(`msg="core serving" addr=(\S+)`)
	lines := bufio.NewScanner(stderr)
	var addr string
	var logged bytes.Buffer
	for lines.Scan() {
		logged.WriteString(lines.Text() + "\n")
		if m := addrRE.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatalf("no address logged:\n%s", logged.String())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	if _, err := os.Stat(filepath.Join(dir, "data", "core.db")); err != nil {
		t.Fatalf("data/core.db not created: %v", err)
	}
	for path, want := range map[string]string{"/healthz": `"status":"ok"`, "/readyz": `"status":"ready"`, "/metrics": "ballet_jobs_running"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(body.String(), want) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body.String())
		}
	}
	resp, err := http.Get("http://" + addr + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 404 || e.Error.Code != "not_found" {
		t.Fatalf("unknown route: %d %+v", resp.StatusCode, e)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.toml")
	os.WriteFile(p, []byte("[jobs]\nconcurency = 4\n"), 0o600)
	out, err := exec.Command(binary, "serve", "--config", p).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2", err)
	}
	if !strings.Contains(string(out), "unknown key jobs.concurency") {
		t.Fatalf("message does not name the key: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Fatal("a bad config still created the database")
	}
}

func TestConfigCommandPrintsEffectiveConfig(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "config").Output()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(string(out), "printed")
	if err != nil {
		t.Fatalf("printed config does not parse back: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(cfg, config.Default()) {
		t.Fatalf("printed config differs from the defaults:\n%s", out)
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"frobnicate"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown command "frobnicate"`) {
		t.Fatalf("code %d, stderr %s", code, stderr.String())
	}
}
