package workspace

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestARemoteThatNeverAnswersTimesOut: a repository host that accepts the
// connection and then says nothing holds a run for the Manager's timeout
// per git command, not for git's own (endless) patience nor the ten-minute
// default, and the run's error says it timed out: it is not taken for a
// refused credential, so nobody is sent to fix a credential that is fine.
func TestARemoteThatNeverAnswersTimesOut(t *testing.T) {
	t.Parallel()
	needGit(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: the handlers return, then the server closes
	m := &Manager{Dir: t.TempDir(), Timeout: time.Second}
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement",
		Remote: Remote{URL: srv.URL + "/repo.git", DefaultBranch: "main", Credential: &Credential{Password: "tok_fine"}}}

	done := make(chan error, 1)
	go func() {
		_, err := m.Prepare(context.Background(), s)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Prepare against a silent remote: %v, want a timeout", err)
		}
		if errors.Is(err, ErrAccessDenied) {
			t.Fatalf("a timeout is reported as a refused credential: %v", err)
		}
	case <-time.After(90 * time.Second): // a bound for a loaded machine: the Manager said one second
		t.Fatal("Prepare against a silent remote did not end: the Manager's timeout is not applied")
	}
}

// TestAWantedPasswordIsAccessDenied: a remote that wants a password the
// runner cannot give (the runner user's credential helper knows the user
// name only; git may not prompt) is ErrAccessDenied — the error that
// sends the user to the project's repository credentials — like a remote
// that wants a user name or refuses the one given.
func TestAWantedPasswordIsAccessDenied(t *testing.T) {
	r := newRemote(t)
	url := httpRemote(t, r, "ballet", "tok_good")
	dir := t.TempDir()
	global := filepath.Join(dir, "gitconfig")
	helper := "[credential]\n\thelper = \"!f() { echo username=ballet; }; f\"\n"
	if err := os.WriteFile(global, []byte(helper), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	m := &Manager{Dir: t.TempDir()}
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement", Remote: Remote{URL: url, DefaultBranch: "main"}}
	_, err := m.Prepare(context.Background(), s)
	if !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("%v, want ErrAccessDenied", err)
	}
	if !strings.Contains(err.Error(), "Password") {
		t.Fatalf("%v: the test meant git to ask for a password", err)
	}
}

// TestEveryGitCommandIsBounded: a Manager whose timeout is unset (or
// nonsense) bounds each git command by DefaultTimeout — never by nothing,
// which would let a silent remote hold a run and its runner slot forever.
// The ten minutes are not waited for: the bound git is given is read.
func TestEveryGitCommandIsBounded(t *testing.T) {
	for _, set := range []time.Duration{0, -time.Second} {
		if got := (&Manager{Timeout: set}).runner().Timeout; got != DefaultTimeout || got < time.Minute {
			t.Errorf("Manager.Timeout %v: git is bounded by %v, want DefaultTimeout (%v, minutes)", set, got, DefaultTimeout)
		}
	}
	if got := (&Manager{Timeout: time.Second}).runner().Timeout; got != time.Second {
		t.Errorf("Manager.Timeout 1s: git is bounded by %v", got)
	}
}

// TestTheCredentialFollowsARedirectOnItsHost: a repository that moved on
// its host (a renamed repository redirects its old path) is still reached
// with the project's credential: the credential is scoped to the host,
// not to the one path it was configured with.
func TestTheCredentialFollowsARedirectOnItsHost(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	const user, secret = "ballet", "tok_redirected"
	target, err := url.Parse(httpRemote(t, r, user, secret)) // serves /repo.git
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if rest, ok := strings.CutPrefix(req.URL.Path, "/old-name.git"); ok {
			to := *req.URL
			to.Path = "/repo.git" + rest
			http.Redirect(w, req, to.String(), http.StatusMovedPermanently)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	m := &Manager{Dir: t.TempDir()}
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement",
		Remote: Remote{URL: srv.URL + "/old-name.git", DefaultBranch: "main", Credential: &Credential{Username: user, Password: secret}}}
	w, err := m.Prepare(context.Background(), s)
	if err != nil {
		t.Fatalf("Prepare through the redirect: %v", err)
	}
	if w.Base != r.ref("refs/heads/main") {
		t.Fatalf("the workspace starts at %s, want main's head", w.Base)
	}
}

// TestARemoteThatEchoesTheCredentialDoesNotLeakIt: a host (or a proxy in
// front of it) whose error message repeats the request's credential —
// as sent, decoded, or URL-escaped — does not put it into the run's
// error, which reaches the session's report and the log.
func TestARemoteThatEchoesTheCredentialDoesNotLeakIt(t *testing.T) {
	t.Parallel()
	needGit(t)
	const user, secret = "ballet", "tok/9+x=y z&secret"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, _ := req.BasicAuth()
		msg := fmt.Sprintf("ERR refused %q for %s:%s (%s)\n", req.Header.Get("Authorization"), u, p, url.QueryEscape(p))
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		fmt.Fprintf(w, "%04x%s", len(msg)+4, msg)
	}))
	t.Cleanup(srv.Close)
	m := &Manager{Dir: t.TempDir()}
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement",
		Remote: Remote{URL: srv.URL + "/repo.git", DefaultBranch: "main", Credential: &Credential{Username: user, Password: secret}}}
	_, err := m.Prepare(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Prepare: %v, want the remote's refusal", err)
	}
	for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(user + ":" + secret)), url.QueryEscape(secret)} {
		if strings.Contains(err.Error(), form) {
			t.Errorf("the credential (as %q) is in the error: %v", form, err)
		}
	}
}

// TestAPushThatTimesOutIsNotAMovedBranch: when the host takes the
// workspace (clone, fetch) but never answers the push, Publish and
// Checkpoint fail with the timeout — work to push again — and never with
// ErrRemoteMoved, which says someone else's commits are on the branch.
func TestAPushThatTimesOutIsNotAMovedBranch(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	run(t, r.work, "--git-dir="+r.url, "config", "http.receivepack", "true")
	backend := &cgi.Handler{
		Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.url), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()},
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
			select { // a push: never answered
			case <-release:
			case <-req.Context().Done():
			}
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	m := &Manager{Dir: t.TempDir(), Timeout: 20 * time.Second} // room for a clone on a loaded machine
	s := Spec{Run: "run-1", Ticket: "ACME-1", Stage: "implement", Remote: Remote{URL: srv.URL + "/repo.git", DefaultBranch: "main"}}
	w, err := m.Prepare(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	m.Timeout = time.Second
	writeFile(t, filepath.Join(w.Dir, "work.txt"), "an hour of work\n")
	if c, err := w.Checkpoint(context.Background()); !errors.Is(err, context.DeadlineExceeded) || c.Pushed {
		t.Errorf("a checkpoint whose push times out: %+v %v, want a timeout", c, err)
	}
	p, err := w.Publish(context.Background(), "done")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRemoteMoved) || p.Pushed {
		t.Fatalf("a publish whose push times out: %+v %v, want a timeout, not a moved branch", p, err)
	}
}

// TestACheckpointAfterPublishPushesNothing: once Publish pushed the work,
// a checkpoint of the same files (the session's checkpoint timer firing
// after it) pushes nothing: the checkpoint stays at the published commit
// rather than moving to a copy of it off the branch.
func TestACheckpointAfterPublishPushesNothing(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	w := prepare(t, &Manager{Dir: t.TempDir()}, spec(r, "run-1", "implement"))
	writeFile(t, filepath.Join(w.Dir, "work.txt"), "done\n")
	p, err := w.Publish(context.Background(), "done")
	if err != nil || !p.Pushed {
		t.Fatalf("%+v %v", p, err)
	}
	c, err := w.Checkpoint(context.Background())
	if err != nil || c.Pushed {
		t.Errorf("a checkpoint of the published files: %+v %v, want nothing pushed", c, err)
	}
	if got := r.ref("refs/ballet/checkpoints/ACME-1/implement"); got != p.Commit {
		t.Errorf("the checkpoint is at %s, want the published commit %s", got, p.Commit)
	}
}
