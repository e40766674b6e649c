package workspace

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// httpRemote serves the bare repository of r over smart HTTP (git
// http-backend) on 127.0.0.1, to user:password only, and returns its URL.
func httpRemote(t *testing.T, r *remote, user, password string) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	run(t, r.work, "--git-dir="+r.url, "config", "http.receivepack", "true")
	backend := &cgi.Handler{
		Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.url), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(r.url)
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCredentialOverHTTP: with a credential, clone, checkpoint, publish and
// drop work against a remote that requires it; without it or with a wrong
// one they fail, without the secret in the error. Afterwards the secret is
// nowhere: not in any file under the runner's folder (workspace, .git,
// mirror, the runner's own git directory), not in the log, not on any git
// command line.
func TestCredentialOverHTTP(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	const user, secret = "ballet", "tok_9f8e7d6c5b4a-very-secret"
	url := httpRemote(t, r, user, secret)

	// git, through a wrapper that records every command line.
	dir := t.TempDir()
	argv := filepath.Join(dir, "argv.log")
	wrapper := filepath.Join(dir, "git")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> "+argv+"\nexec git \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m := &Manager{Dir: t.TempDir(), Git: wrapper, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement", Remote: Remote{URL: url, DefaultBranch: "main", Credential: &Credential{Username: user, Password: secret}}}
	ctx := context.Background()

	for _, bad := range []*Credential{nil, {Username: user, Password: "wrong"}} {
		b := s
		b.Remote.Credential = bad
		_, err := m.Prepare(ctx, b)
		if !errors.Is(err, ErrAccessDenied) {
			t.Errorf("credential %v: %v, want ErrAccessDenied", bad, err)
		} else if strings.Contains(err.Error(), "wrong") {
			t.Errorf("the password is in the error: %v", err)
		}
	}

	w, err := m.Prepare(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Dir, "work.txt"), "done\n")
	if c, err := w.Checkpoint(ctx); err != nil || !c.Pushed {
		t.Fatalf("%+v %v", c, err)
	}
	writeFile(t, filepath.Join(w.Dir, "more.txt"), "more\n")
	p, err := w.Publish(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	if r.ref("refs/heads/ballet/ACME-1") != p.Commit {
		t.Fatal("not pushed")
	}
	if err := w.DropCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if r.ref("refs/ballet/checkpoints/ACME-1/implement") != "" {
		t.Fatal("checkpoint not dropped")
	}
	// A second run reuses the mirror over HTTP.
	s.Run = "run-2"
	if _, err := m.Prepare(ctx, s); err != nil {
		t.Fatal(err)
	}

	forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))}
	leaks := func(what, content string) {
		t.Helper()
		for _, f := range forms {
			if strings.Contains(content, f) {
				t.Errorf("the secret is in %s", what)
			}
		}
	}
	files := 0
	err = filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		leaks(p, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d files under the runner's folder: the check looked at nothing", files)
	}
	if !strings.Contains(logs.String(), "push") {
		t.Fatalf("the log saw no git command: %q", logs.String())
	}
	leaks("the log", logs.String())
	cmdlines, err := os.ReadFile(argv)
	if err != nil || !strings.Contains(string(cmdlines), "ls-remote") {
		t.Fatalf("the command lines were not recorded: %v", err)
	}
	leaks("a git command line", string(cmdlines))
	if strings.Contains(string(cmdlines), "extraHeader") {
		t.Error("the header is configured on a command line")
	}
}

// TestCredentialHelpersOff: the runner user's credential helpers are not
// asked when a project has its own credential: a wrong credential fails,
// though a helper holds a good one for the host (and none stores it).
func TestCredentialHelpersOff(t *testing.T) {
	r := newRemote(t)
	const user, secret = "ballet", "tok_good"
	url := httpRemote(t, r, user, secret)
	dir := t.TempDir()
	store := filepath.Join(dir, "stored")
	host := strings.TrimSuffix(url, "/repo.git")
	if err := os.WriteFile(store, []byte(strings.Replace(host, "http://", "http://"+user+":"+secret+"@", 1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(global, []byte("[credential]\n\thelper = store --file="+store+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	m := &Manager{Dir: t.TempDir()}
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement", Remote: Remote{URL: url, DefaultBranch: "main"}}
	if _, err := m.Prepare(context.Background(), s); err != nil {
		t.Fatalf("without a credential of its own, the user's helper serves: %v", err)
	}
	s.Remote.Credential = &Credential{Username: user, Password: "tok_wrong"}
	if _, err := m.Prepare(context.Background(), s); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("%v, want ErrAccessDenied: the helper's credential was used instead of the project's", err)
	}
	if b, err := os.ReadFile(store); err != nil || !strings.Contains(string(b), secret) {
		t.Errorf("the user's stored credential was erased: %q %v", b, err)
	}
}
