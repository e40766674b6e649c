package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/testkit/apitest"
)

// `ballet dev fake-model` serves the fake model on 127.0.0.1, prints the
// URL to point the CLIs at and the scenarios, plays --scenario without a
// marker, writes what it is sent into --dump, and stops on a signal.
func TestDevFakeModel(t *testing.T) {
	t.Parallel()
	dump := t.TempDir()
	var out, errOut syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- devFakeModel(ctx, []string{"--addr", "127.0.0.1:0", "--scenario", "report-blocked", "--dump", dump}, &out, &errOut)
	}()
	urlRE := regexp.MustCompile(`fake model listening on (http://127\.0\.0\.1:\d+)\n`)
	apitest.Await(t, "the URL", func() bool { return urlRE.MatchString(out.String()) })
	url := urlRE.FindStringSubmatch(out.String())[1]
	for _, want := range []string{"ANTHROPIC_BASE_URL=" + url, url + "/v1", fakemodel.Marker("slow-work"), "plays report-blocked"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"no marker"}],
		"tools":[{"name":"mcp__ballet__submit_report","input_schema":{"properties":{"outcome":{},"summary":{}}}}]}`
	resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`\"outcome\":\"blocked\"`)) {
		t.Errorf("answer: %d %s", resp.StatusCode, b)
	}
	if got, _ := os.ReadFile(filepath.Join(dump, "0001-anthropic.json")); string(got) != body {
		t.Errorf("dump: %q, want the request's body", got)
	}
	if !strings.Contains(errOut.String(), "scenario=report-blocked") {
		t.Errorf("no log line for the turn: %s", errOut.String())
	}

	cancel()
	if code := apitest.Receive(t, done, "fake-model to stop"); code != 0 {
		t.Errorf("exit %d: %s", code, errOut.String())
	}
}

// Usage errors exit 2, a busy address 1, each with a message that names
// the problem.
func TestDevUsage(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "ballet dev fake-model"},
		{[]string{"tools"}, 2, "ballet dev fake-model"},
		{[]string{"fake-model", "--scenario", "nope"}, 2, `--scenario: unknown scenario "nope"`},
		{[]string{"fake-model", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"fake-model", "--nope"}, 2, "ballet dev fake-model --help"},
		{[]string{"fake-model", "--addr", l.Addr().String()}, 1, "--addr"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"dev"}, c.args...), &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("ballet dev %v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// The real binary stops on SIGTERM with exit 0, also while a request of
// the hang scenario is waiting.
func TestDevFakeModelStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "dev", "fake-model")
	var out, errOut syncBuf
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	urlRE := regexp.MustCompile(`listening on (http://\S+)\n`)
	apitest.Await(t, "the URL", func() bool { return urlRE.MatchString(out.String()) })
	url := urlRE.FindStringSubmatch(out.String())[1]
	go func() {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.ReplaceAll(fakemodel.Marker("hang"), `"`, `\"`) + `"}],"tools":[{"name":"Bash"}]}`
		resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
	}()
	apitest.Await(t, "the hanging request", func() bool { return strings.Contains(errOut.String(), "hang=true") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if err := apitest.Receive(t, waited, "the binary to exit"); err != nil {
		t.Errorf("exit: %v\n%s", err, errOut.String())
	}
}
