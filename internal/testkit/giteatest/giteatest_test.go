package giteatest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/orphan"
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

// TestBinary: BALLET_SKIP_GITEA=1 skips; a missing binary skips, or fails
// with CI=true.
func TestBinary(t *testing.T) {
	for _, c := range []struct {
		skip, bin, ci string
		wantErr       string
		wantSkip      bool
	}{
		{skip: "1", bin: "/nonexistent", wantErr: "BALLET_SKIP_GITEA=1", wantSkip: true},
		{skip: "yes", wantErr: `BALLET_SKIP_GITEA="yes": set it to 1`},
		{bin: "/nonexistent/gitea", wantErr: "not found at /nonexistent/gitea: build it with scripts/gitea.sh"},
	} {
		t.Setenv(SkipEnv, c.skip)
		t.Setenv(BinaryEnv, c.bin)
		_, err := binary()
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%+v: %v, want %q", c, err, c.wantErr)
		}
	}
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
