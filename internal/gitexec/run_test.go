package gitexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunErrors: a failing command's error names the command and carries
// git's stderr on one line, printable, with a URL's user information and
// every listed secret removed; its exit code is readable.
func TestRunErrors(t *testing.T) {
	r := Runner{Prefix: "tester"}
	_, err := r.Run(context.Background(), Cmd{
		Args:    []string{"ls-remote", "https://bob:s3cret-token@127.0.0.1:1/repo.git", "\x1b[2Jhidden-secret"},
		Secrets: []string{"hidden-secret"},
	})
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v, want an *Error", err)
	}
	msg := err.Error()
	for _, leak := range []string{"s3cret-token", "bob:", "hidden-secret", "\x1b"} {
		if strings.Contains(msg, leak) {
			t.Errorf("the error holds %q: %s", leak, msg)
		}
	}
	if !strings.HasPrefix(msg, "tester: git ls-remote https://xxxxx@127.0.0.1:1/repo.git") {
		t.Errorf("the error does not name the command: %s", msg)
	}
	if ExitCode(err) <= 0 {
		t.Errorf("ExitCode = %d, want git's non-zero status", ExitCode(err))
	}
	if ge.Stderr == "" || strings.Contains(ge.Stderr, "\n") {
		t.Errorf("Stderr = %q, want git's message on one line", ge.Stderr)
	}
	if ExitCode(errors.New("not git")) != -1 {
		t.Error("ExitCode of an error that is no exit is not -1")
	}
}

// TestRunTimeout: the runner's own timeout ends the command and says so,
// wrapping context.DeadlineExceeded; the caller's cancel wraps its cause.
func TestRunTimeout(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "slow-git")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 30 &\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Runner{Bin: script, Timeout: 100 * time.Millisecond, Prefix: "tester"}
	_, err := r.Run(context.Background(), Cmd{Args: []string{"status"}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 100ms") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, Cmd{Args: []string{"status"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestRedactURL: an http(s) URL loses all its user information, an ssh
// URL its password; anything else is unchanged.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:tok@host/r.git": "https://xxxxx@host/r.git",
		"http://tok@host/r.git":       "http://xxxxx@host/r.git",
		"ssh://git:pw@host/r.git":     "ssh://git:xxxxx@host/r.git",
		"git@host:r.git":              "git@host:r.git",
		"/srv/repo.git":               "/srv/repo.git",
		"https://host/r.git":          "https://host/r.git",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RedactURLsIn("fatal: https://u:tok@h/r and u:tok@ again", "https://u:tok@h/r"); strings.Contains(got, "tok") {
		t.Errorf("RedactURLsIn left the token: %s", got)
	}
}

// TestMirrors: a mirror is made once per URL, under the root, and holders
// of one mirror take turns.
func TestMirrors(t *testing.T) {
	var m Mirrors
	root := t.TempDir()
	ctx := context.Background()
	dir, unlock, err := m.Open(ctx, Runner{}, root, "https://example.invalid/a.git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil || filepath.Dir(dir) != root {
		t.Fatalf("mirror %s: %v", dir, err)
	}
	var wg sync.WaitGroup
	got := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		d, u, err := m.Open(ctx, Runner{}, root, "https://example.invalid/a.git")
		if err == nil {
			u()
		}
		got <- d
	}()
	select {
	case <-got:
		t.Fatal("a second holder opened a locked mirror")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	wg.Wait()
	if d := <-got; d != dir {
		t.Errorf("the same URL gave %s, then %s", dir, d)
	}
	other, unlock2, err := m.Open(ctx, Runner{}, root, "https://example.invalid/b.git")
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
	if other == dir {
		t.Error("two URLs share a mirror")
	}
}
