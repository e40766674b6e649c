package gitea

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
)

// TestTheDefaults: a Forge of zero Options bounds an API call by 30 s,
// runs on the real clock, reads an unmergeable pull request five times
// 300 ms apart and believes a conflict after two minutes; what is given
// is kept.
func TestTheDefaults(t *testing.T) {
	t.Parallel()
	f := New(Options{})
	if f.hc.Timeout != 30*time.Second || f.conflictAfter != 2*time.Minute || f.clock != (clock.Real{}) || f.tries != 5 || f.wait != 300*time.Millisecond {
		t.Errorf("defaults: timeout %s, conflict after %s, clock %T, %d tries %s apart", f.hc.Timeout, f.conflictAfter, f.clock, f.tries, f.wait)
	}
	if !f.CanMerge() {
		t.Error("CanMerge: false, want true: Ballet merges on Gitea")
	}
	clk := clock.NewFake(fakeNow)
	f = New(Options{HTTPClient: &http.Client{Timeout: 5 * time.Second}, Clock: clk, MergeableTries: 2, MergeableWait: time.Second, ConflictAfter: time.Hour})
	if f.hc.Timeout != 5*time.Second || f.conflictAfter != time.Hour || f.clock != clk || f.tries != 2 || f.wait != time.Second {
		t.Errorf("given: timeout %s, conflict after %s, clock %T, %d tries %s apart", f.hc.Timeout, f.conflictAfter, f.clock, f.tries, f.wait)
	}
	if f := New(Options{MergeableTries: -1, MergeableWait: -time.Second}); f.tries != 5 || f.wait != 300*time.Millisecond {
		t.Errorf("negative tries and wait: %d tries %s apart, want the defaults", f.tries, f.wait)
	}
}

// TestAnUnmergeableAnswerIsReadAgain: State reads a pull request Gitea
// calls unmergeable MergeableTries times, MergeableWait apart (by default
// five times, 300 ms apart) before it takes the answer.
func TestAnUnmergeableAnswerIsReadAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tries int
		wait  time.Duration
		reads int
		slept time.Duration
	}{{0, 0, 5, 1200 * time.Millisecond}, {3, time.Second, 3, 2 * time.Second}} {
		g := newFake(t)
		g.scriptOpenPull(false)
		clk := clock.NewFake(fakeNow)
		f := New(Options{Secrets: g.forge(nil).secrets, Clock: clk, MergeableTries: c.tries, MergeableWait: c.wait})
		done := make(chan error, 1)
		go func() { _, err := f.State(context.Background(), g.repo(), fakePR); done <- err }()
		var err error
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-time.After(time.Millisecond):
				if clk.Waiters() > 0 {
					clk.Advance(100 * time.Millisecond)
				}
			}
		}
		if err != nil {
			t.Fatalf("State: %v", err)
		}
		if n := len(g.requests("GET /repos/acme/app/pulls/7")) - len(g.requests("GET /repos/acme/app/pulls/7/")); n != c.reads || clk.Now().Sub(fakeNow) != c.slept {
			t.Errorf("tries %d wait %s: %d reads over %s, want %d over %s", c.tries, c.wait, n, clk.Now().Sub(fakeNow), c.reads, c.slept)
		}
	}
}

// TestTargetRefusesBadAPIURLs: an API URL override must be an http(s) URL
// with a host, without credentials, query or fragment, ending with
// /api/v1.
func TestTargetRefusesBadAPIURLs(t *testing.T) {
	for _, c := range []struct{ api, base string }{
		{"http://api.example.com/api/v1", "http://api.example.com"},
		{"https://api.example.com/api/v1", "https://api.example.com"},
		{"ftp://api.example.com/api/v1", ""},
		{"https:///api/v1", ""},
		{"https://u:p@api.example.com/api/v1", ""},
		{"https://u@api.example.com/api/v1", ""},
		{"https://api.example.com/api/v1?x=1", ""},
		{"https://api.example.com/api/v1#x", ""},
		{"https://api.example.com/%zz/api/v1", ""},
	} {
		base, _, _, err := Target(forge.Repo{URL: "https://example.com/acme/app.git", APIURL: c.api})
		switch {
		case c.base != "" && (err != nil || base != c.base):
			t.Errorf("%s: %q %v, want %q", c.api, base, err, c.base)
		case c.base == "" && (err == nil || !strings.Contains(err.Error(), "repository.api_url")):
			t.Errorf("%s: %q %v, want refused", c.api, base, err)
		}
	}
}

// TestACredentialThatDoesNotResolveIsAnError: a credentials reference the
// platform cannot resolve fails the call, naming the repository, before
// anything is asked.
func TestACredentialThatDoesNotResolveIsAnError(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	repo := g.repo()
	repo.CredentialsRef = "env:SOMETHING_ELSE"
	_, err := g.forge(clock.NewFake(fakeNow)).State(context.Background(), repo, fakePR)
	if err == nil || !strings.Contains(err.Error(), "acme/app") {
		t.Fatalf("State with an unresolvable credential: %v", err)
	}
	if n := len(g.requests("")); n != 0 {
		t.Fatalf("%d requests", n)
	}
}

// TestEveryCallGoesThroughTheForgesClient: the SDK's calls use the
// configured HTTP client, the caller's context, the user agent "ballet",
// and never ask Gitea its version first.
func TestEveryCallGoesThroughTheForgesClient(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	g.scriptOpenPull(true)
	via := 0
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		via++
		return http.DefaultTransport.RoundTrip(r)
	})}
	f := New(Options{Secrets: g.forge(nil).secrets, HTTPClient: hc, Clock: clock.NewFake(fakeNow), MergeableTries: 1})
	st, err := f.State(context.Background(), g.repo(), fakePR)
	if err != nil || !st.Open || st.HeadSHA != headSHA {
		t.Fatalf("State: %+v %v", st, err)
	}
	rs := g.requests("")
	if via != len(rs) {
		t.Errorf("%d of %d requests went through the configured client", via, len(rs))
	}
	for _, r := range rs {
		if strings.Contains(r.path, "version") {
			t.Errorf("asked %s", r.path)
		}
		if ua := r.header.Get("User-Agent"); ua != "ballet" {
			t.Errorf("%s %s: User-Agent %q, want ballet", r.method, r.path, ua)
		}
		if a := r.header.Get("Authorization"); a != "token "+fakeToken {
			t.Errorf("%s %s: Authorization %q", r.method, r.path, a)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := len(g.requests(""))
	if _, err := f.State(ctx, g.repo(), fakePR); !errors.Is(err, context.Canceled) {
		t.Errorf("State with a cancelled context: %v, want context.Canceled", err)
	}
	if n := len(g.requests("")) - before; n != 0 {
		t.Errorf("a cancelled State sent %d requests", n)
	}
}

// TestAnUnreachableGiteaIsAnError: a transport error (nothing listening)
// is an error naming the call and the repository, never a success.
func TestAnUnreachableGiteaIsAnError(t *testing.T) {
	t.Parallel()
	g := newFake(t)
	repo := g.repo()
	g.srv.Close()
	f := g.forge(clock.NewFake(fakeNow))
	if _, err := f.State(context.Background(), repo, fakePR); err == nil || !strings.Contains(err.Error(), "read pull request #7 in acme/app") {
		t.Errorf("State: %v", err)
	}
	if err := f.Close(context.Background(), repo, fakePR); err == nil || !strings.Contains(err.Error(), "acme/app") {
		t.Errorf("Close: %v", err)
	}
	if err := f.Merge(context.Background(), repo, fakePR); err == nil || !strings.Contains(err.Error(), "merge pull request #7 in acme/app") {
		t.Errorf("Merge: %v", err)
	}
}

// TestErrorsQuoteGiteaOnOneLine: Gitea's message is in the error, on one
// line, cut after 300 characters; an anonymous call's error too.
func TestErrorsQuoteGiteaOnOneLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 299) + "yz"
	for _, c := range []struct {
		msg, want, not string
		anon           bool
	}{
		{"the database\n  is   locked", "HTTP 500: the database is locked", "\n", false},
		{"boom", "HTTP 500: boom", "xxxxx", true},
		{strings.Repeat("x", 300), "HTTP 500: " + strings.Repeat("x", 300), "…", false},
		{long, "HTTP 500: " + long[:300] + "…", "yz", false},
	} {
		g := newFake(t)
		g.on("GET /repos/acme/app/pulls/7", 500, map[string]string{"message": c.msg})
		repo := g.repo()
		if c.anon {
			repo = g.anon()
		}
		_, err := g.forge(clock.NewFake(fakeNow)).State(context.Background(), repo, fakePR)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("State: %v, want %q and no %q", err, c.want, c.not)
		}
	}
}

// TestFaultPointsAroundTheWrites: the failure suite kills Core at
// gitea.create_pr.before/after and gitea.merge.before/after: a crash
// before a write has sent nothing, a crash after has sent the write.
func TestFaultPointsAroundTheWrites(t *testing.T) {
	if op := os.Getenv("GITEA_FAULT_CHILD"); op != "" {
		g := &fakeGitea{t: t}
		repo := forge.Repo{URL: os.Getenv("GITEA_FAKE_URL") + "/acme/app.git", DefaultBranch: "main", CredentialsRef: "env:GITEA_TOKEN"}
		f := g.forge(clock.NewFake(fakeNow))
		if op == "merge" {
			t.Fatalf("Merge returned: %v", f.Merge(context.Background(), repo, fakePR))
		}
		_, err := f.EnsurePullRequest(context.Background(), repo, "feature", "t", "b")
		t.Fatalf("Ensure returned: %v", err)
	}
	t.Parallel()
	for _, c := range []struct {
		point, op, write string
		sent             int
	}{
		{FaultMergeBefore, "merge", "POST /repos/acme/app/pulls/7/merge", 0},
		{FaultMergeAfter, "merge", "POST /repos/acme/app/pulls/7/merge", 1},
		{FaultCreateBefore, "create", createRoute, 0},
		{FaultCreateAfter, "create", createRoute, 1},
	} {
		t.Run(c.point, func(t *testing.T) {
			t.Parallel()
			g := newFake(t)
			g.on("POST /repos/acme/app/pulls/7/merge", 200, "")
			g.on(branchRoute, 200, branchJSON("feature", headSHA))
			g.on(createRoute, 201, pullJSON(9, sdk.StateOpen, true, false))
			cmd := exec.Command(os.Args[0], "-test.run=^TestFaultPointsAroundTheWrites$", "-test.count=1")
			cmd.Env = append(os.Environ(), fault.EnvVar+"="+c.point, "GITEA_FAULT_CHILD="+c.op, "GITEA_FAKE_URL="+g.srv.URL, "BALLET_SKIP_GITEA=1")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("the child was not killed at %s: %v\n%s", c.point, err, out)
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the child at %s ended %v, want SIGKILL\n%s", c.point, err, out)
			}
			if n := len(g.requests(c.write)); n != c.sent {
				t.Fatalf("killed at %s after %d writes, want %d", c.point, n, c.sent)
			}
		})
	}
}
