package giteatest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/orphan"
	"github.com/ballet/ballet/internal/testkit/parts"
)

// orphanEnv makes this test binary a process that starts a Gitea, prints
// its pid, and waits to be killed (TestMain).
const orphanEnv = "GITEATEST_ORPHAN_ROOT"

func TestMain(m *testing.M) {
	if root := os.Getenv(orphanEnv); root != "" {
		s, err := Launch(os.Getenv(BinaryEnv), root)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(s.cmd.Process.Pid)
		time.Sleep(2 * time.Minute) // a hang guard: the test kills this process long before
		s.Stop()
		os.Exit(1)
	}
	os.Exit(Main(m))
}

// TestSeed walks every helper a forge test needs on the shared server.
func TestSeed(t *testing.T) {
	s := Shared(t)
	if again := Shared(t); again != s {
		t.Fatal("Shared started a second server")
	}
	owner := s.CreateUser(t, "owner")
	reviewer := s.CreateUser(t, "reviewer")
	stranger := s.CreateUser(t, "stranger")
	r := s.CreateRepo(t, owner)
	s.AddCollaborator(t, r, reviewer)
	if !strings.HasPrefix(r.CloneURL, s.URL+"/"+owner.Name+"/") || !strings.HasSuffix(r.CloneURL, ".git") {
		t.Fatalf("clone URL %q", r.CloneURL)
	}

	sha := r.PushBranch(t, "ballet/ACME-1")
	if len(sha) != 40 {
		t.Fatalf("PushBranch returned %q", sha)
	}
	sha2 := r.PushBranch(t, "ballet/ACME-1")
	if sha2 == sha {
		t.Fatal("a second push did not move the branch")
	}
	r.SetStatus(t, sha2, "ci/test", "success")
	n := r.CreatePR(t, "ballet/ACME-1", "title", "body")
	pr := r.Pull(t, n)
	if pr.Head == nil || pr.Head.Sha != sha2 || pr.Head.Ref != "ballet/ACME-1" || pr.Base.Ref != "main" {
		t.Fatalf("pull request %+v", pr)
	}
	r.Review(t, n, reviewer, Approve, "fine")
	r.Review(t, n, stranger, RequestChanges, "no")
	r.ProtectBranch(t, "main", []string{"ci/test"}, 1)
	r.CreateWebhook(t, "http://127.0.0.1:9/hook", "s3cret", []string{"pull_request"})
	r.MergeByHand(t, n)
	if pr = r.Pull(t, n); !pr.HasMerged {
		t.Fatalf("not merged by hand: %+v", pr)
	}

	sha3 := r.PushBranch(t, "ballet/ACME-2")
	n2 := r.CreatePR(t, "ballet/ACME-2", "two", "")
	r.ClosePR(t, n2)
	if pr = r.Pull(t, n2); pr.State != "closed" || pr.HasMerged || pr.Head.Sha != sha3 {
		t.Fatalf("closed: %+v", pr)
	}
	if prs := r.ListPulls(t); len(prs) != 2 {
		t.Fatalf("ListPulls: %d, want 2", len(prs))
	}
}

// TestServerDiesWithItsTest: a test binary killed outright (go test's
// -timeout) runs no cleanup; its Gitea must not outlive it.
func TestServerDiesWithItsTest(t *testing.T) {
	bin := Binary(t)
	orphan.DiesWithItsTest(t, "gitea", orphanEnv+"="+t.TempDir(), BinaryEnv+"="+bin)
}

// TestBinary: a missing binary, and a build without its -static folder
// (BALLET_GITEA pointing at a bare binary), are missing parts: an error
// naming the path and how to build it (package parts then fails the test
// under CI=true and counts a skip elsewhere).
func TestBinary(t *testing.T) {
	parts.Aside(t) // the skips below are provoked, not missing parts
	bare := filepath.Join(t.TempDir(), "gitea")
	if err := os.WriteFile(bare, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin     string
		wantErr string
	}{
		{bin: "/nonexistent/gitea", wantErr: "not found at /nonexistent/gitea: build it with scripts/gitea.sh"},
		{bin: bare, wantErr: "its options and templates are not at " + bare + "-static: build it with scripts/gitea.sh"},
	} {
		t.Setenv(BinaryEnv, c.bin)
		_, err := binary()
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%+v: %v, want %q", c, err, c.wantErr)
		}
	}
	// Through Binary: a failure under CI=true, a skip elsewhere.
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		t.Setenv(SkipEnv, "")
		t.Setenv(BinaryEnv, bare)
		var fatal, skip string
		done := make(chan struct{})
		go func() {
			defer close(done)
			Binary(&endTB{TB: t, fatal: &fatal, skip: &skip})
		}()
		<-done
		if (ci == "true") != (fatal != "") || (ci == "true") == (skip != "") {
			t.Errorf("CI=%q, Gitea without -static: fatal %q, skip %q", ci, fatal, skip)
		}
	}
}

// endTB records how a kit ended a test; Fatalf and Skipf end its
// goroutine as the testing package would.
type endTB struct {
	testing.TB
	fatal, skip *string
}

func (e *endTB) Helper() {}
func (e *endTB) Fatalf(format string, args ...any) {
	*e.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (e *endTB) Skipf(format string, args ...any) {
	*e.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// BenchmarkStart measures a server's start: configuration, migration, the
// administrator, the process up and answering, its token.
func BenchmarkStart(b *testing.B) {
	bin := Binary(b)
	for b.Loop() {
		s, err := Launch(bin, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		s.Stop()
	}
}
