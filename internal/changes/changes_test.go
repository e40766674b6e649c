package changes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

type projects struct{ repo string }

func (p projects) FindProject(ctx context.Context, ref string) (tenancy.Project, error) {
	return tenancy.Project{Key: "ACME", OrganizationID: "o", Repository: &tenancy.Repository{Forge: "git", URL: p.repo, DefaultBranch: "main"}}, nil
}
func (p projects) FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error) {
	return tenancy.Organization{Slug: "acme"}, nil
}

type runs []run.Run

func (r runs) List(ctx context.Context, itemID string) ([]run.Run, error) { return r, nil }

// repo makes a work repository with main and returns a git helper.
func repo(t testing.TB) (string, func(args ...string) string) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Ann", "GIT_AUTHOR_EMAIL=ann@example.com",
			"GIT_COMMITTER_NAME=Ann", "GIT_COMMITTER_EMAIL=ann@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet", "--initial-branch=main")
	write(t, dir, "a.txt", "one\ntwo\n")
	write(t, dir, "old.txt", "stays the same\nacross a rename\n")
	git("add", ".")
	git("commit", "--quiet", "-m", "base")
	return dir, git
}

func write(t testing.TB, dir, name, content string) {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func service(dir string, rs runs) *Service {
	g := gitforge.New("")
	return &Service{Projects: projects{dir}, Runs: rs, Cache: NewCache(0),
		Sources: func(string) (Source, error) { return g, nil }}
}

// TestChangesOnPlainGit: nothing ahead, then commits (one of a run of the
// ticket, one forging another run), files (added, modified, renamed,
// deleted, binary) with patches, and a cut patch.
func TestChangesOnPlainGit(t *testing.T) {
	dir, git := repo(t)
	it := tracker.Item{ID: "i1", Key: "ACME-1", ProjectID: "p"}
	s := service(dir, runs{{ID: "run1", Stage: "implement"}})
	ctx := context.Background()

	git("branch", "ballet/ACME-1")
	c, err := s.Changes(ctx, it)
	if err != nil || c.Head == "" || c.Ahead != 0 || len(c.Commits) != 0 || len(c.Files) != 0 || c.Note != "" {
		t.Fatalf("nothing ahead: %+v, %v", c, err)
	}

	git("checkout", "--quiet", "ballet/ACME-1")
	write(t, dir, "a.txt", "one\n2\n")
	write(t, dir, "b.bin", "\x00\x01\x02")
	git("mv", "old.txt", "new.txt")
	git("add", ".")
	git("commit", "--quiet", "-m", "ACME-1 implement: change a\n\nwhy\n\nBallet-Ticket: ACME-1\nBallet-Stage: implement\nBallet-Run: run1")
	big := strings.Repeat("a line of the big file\n", MaxFilePatch/20)
	write(t, dir, "big.txt", big)
	git("add", ".")
	git("commit", "--quiet", "-m", "Big file\n\nBallet-Ticket: ACME-1\nBallet-Stage: review\nBallet-Run: run1")
	head := git("rev-parse", "HEAD")

	c, err = s.Changes(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	if c.Head != head || c.Ahead != 2 || len(c.Commits) != 2 || c.Branch != "ballet/ACME-1" || c.Base != "main" {
		t.Fatalf("changes %+v", c)
	}
	if cm := c.Commits[1]; cm.Title != "ACME-1 implement: change a" || cm.Stage != "implement" || cm.Run != "run1" || cm.Author != "Ann <ann@example.com>" {
		t.Errorf("the runner's commit %+v", cm)
	}
	if cm := c.Commits[0]; cm.Title != "Big file" || cm.Stage != "" || cm.Run != "" {
		t.Errorf("a commit naming a run of another stage is not attributed: %+v", cm)
	}
	files := map[string]ChangedFile{}
	var paths []string
	for _, f := range c.Files {
		files[f.Path] = f
		paths = append(paths, f.Path)
	}
	sort.Strings(paths)
	if strings.Join(paths, ",") != "a.txt,b.bin,big.txt,new.txt" {
		t.Fatalf("files %v", paths)
	}
	if f := files["a.txt"]; f.Status != "modified" || f.Additions != 1 || f.Deletions != 1 || !strings.HasPrefix(f.Patch, "@@ -1,2 +1,2 @@") ||
		!strings.Contains(f.Patch, "-two\n+2\n") || f.Truncated {
		t.Errorf("a.txt %+v", f)
	}
	if f := files["new.txt"]; f.Status != "renamed" || f.PreviousPath != "old.txt" || f.Patch != "" {
		t.Errorf("new.txt %+v", f)
	}
	if f := files["b.bin"]; f.Status != "added" || !f.Binary || f.Patch != "" {
		t.Errorf("b.bin %+v", f)
	}
	if f := files["big.txt"]; !f.Truncated || len(f.Patch) > MaxFilePatch || !strings.HasSuffix(f.Patch, "\n") || f.Additions != MaxFilePatch/20 {
		t.Errorf("big.txt: truncated %v, %d bytes, %d additions", f.Truncated, len(f.Patch), f.Additions)
	}
	if !strings.Contains(c.Note, "the patches of 1 files are cut") {
		t.Errorf("note %q", c.Note)
	}
	if s.Cache.Len() != 2 { // one per pair of heads compared
		t.Errorf("cache holds %d entries", s.Cache.Len())
	}
	if h, err := s.Head(ctx, it); err != nil || h != head {
		t.Errorf("Head %q %v", h, err)
	}
}

func TestBoundLeavesOutPatchesPastTheBudget(t *testing.T) {
	var files []forge.FileChange
	for range 12 {
		files = append(files, forge.FileChange{Path: "f", Status: forge.FileModified, Patch: strings.Repeat("+x\n", MaxFilePatch/3)})
	}
	c := bound(forge.Comparison{TotalCommits: 300, Commits: make([]forge.Commit, 300), Files: files})
	whole := 0
	for _, f := range c.files {
		if !f.Truncated {
			whole++
		}
	}
	if whole != MaxPatchBytes/MaxFilePatch || !c.commitsCut || len(c.commits) != MaxCommits || !strings.Contains(c.note, "newest 250 of 300") {
		t.Fatalf("whole %d, commits cut %v (%d), note %q", whole, c.commitsCut, len(c.commits), c.note)
	}
}

func TestTrailers(t *testing.T) {
	for msg, want := range map[string]string{
		"subject only: Ballet-Run: x":                    "",
		"s\n\nBallet-Run: r1\nBallet-Stage: a":           "r1",
		"s\n\nBallet-Run: r1\n\nnot trailers at the end": "",
		"s\n\nBallet-Run: r1\nfree text line":            "",
	} {
		if got := trailers(msg)[TrailerRun]; got != want {
			t.Errorf("%q: %q, want %q", msg, got, want)
		}
	}
}

// TestPullRequestLinksAreWebPages: the pull request's, a check's and a
// review's URL come from the forge (a check's target URL is whatever CI
// sent); only absolute http(s) URLs reach the answer, the rest become no
// link at all.
func TestPullRequestLinksAreWebPages(t *testing.T) {
	for in, want := range map[string]string{
		"https://ci.example/build/17":              "https://ci.example/build/17",
		" http://127.0.0.1:3000/o/r/pulls/1 ":      "http://127.0.0.1:3000/o/r/pulls/1",
		"HTTPS://ci.example/x":                     "HTTPS://ci.example/x",
		"":                                         "",
		"javascript:alert(1)":                      "",
		"JavaScript:alert(1)":                      "",
		" javascript:alert(1)":                     "",
		"java\tscript:alert(1)":                    "",
		"data:text/html,<script>alert(1)</script>": "",
		"vbscript:msgbox(1)":                       "",
		"//evil.example/x":                         "",
		"/relative/path":                           "",
		"http:/no-host":                            "",
		"https://ci.example/a\nb":                  "",
	} {
		p := pullRequest(forge.PullView{URL: in, Checks: []forge.CheckView{{Name: "ci", State: forge.CheckFailure, URL: in}},
			Reviews: []forge.ReviewView{{Reviewer: "alice", State: forge.ReviewApproved, URL: in}}})
		if p.URL != want || p.Checks[0].URL != want || p.Reviews[0].URL != want {
			t.Errorf("%q: pull request %q, check %q, review %q; want %q", in, p.URL, p.Checks[0].URL, p.Reviews[0].URL, want)
		}
	}
}

// BenchmarkChangesCachedHead: GET …/changes's work on a head already
// compared (the heads read, the cache hit, the runs read).
func BenchmarkChangesCachedHead(b *testing.B) {
	dir, git := repo(b)
	git("checkout", "--quiet", "-b", "ballet/ACME-1")
	for i := range 20 {
		write(b, dir, "a.txt", strings.Repeat("line\n", 100*(i+1)))
		git("add", ".")
		git("commit", "--quiet", "-m", "change")
	}
	s := service(dir, nil)
	it := tracker.Item{ID: "i1", Key: "ACME-1", ProjectID: "p"}
	ctx := context.Background()
	if _, err := s.Changes(ctx, it); err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.Changes(ctx, it); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}
