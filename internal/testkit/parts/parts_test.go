package parts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// end records how a kit ended a test; Fatalf and Skipf end its goroutine
// as the testing package would.
type end struct {
	testing.TB
	fatal, skip string
}

func (e *end) Helper()      {}
func (e *end) Name() string { return "TestSomething/sub" }
func (e *end) Fatalf(format string, args ...any) {
	e.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (e *end) Skipf(format string, args ...any) {
	e.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(f func(t testing.TB)) *end {
	e := &end{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(e)
	}()
	<-done
	return e
}

// A missing part fails under CI=true and is a counted skip elsewhere; a
// developer's ask skips, counted apart; a misspelt ask fails; no ask lets
// the test go on. Every skip is one line of the summary file.
func TestMissingAndAsked(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SummaryEnv, summary)
	missing := errors.New("gitea not found at /x: build it with scripts/gitea.sh")
	for _, c := range []struct {
		name, ci, ask string
		f             func(t testing.TB)
		fatal, skip   string
	}{
		{name: "missing under CI", ci: "true", f: func(t testing.TB) { Missing(t, Gitea, missing) }, fatal: "gitea is missing, and under CI=true"},
		{name: "missing elsewhere", f: func(t testing.TB) { Missing(t, Gitea, missing) }, skip: "build it with scripts/gitea.sh"},
		{name: "missing, CI=false", ci: "false", f: func(t testing.TB) { Missing(t, OpenCode, missing) }, skip: "opencode is missing"},
		{name: "asked", ask: "1", f: func(t testing.TB) { Asked(t, Chromium, "PARTS_SKIP") }, skip: "PARTS_SKIP=1"},
		{name: "asked under CI", ci: "true", ask: "1", f: func(t testing.TB) { Asked(t, Chromium, "PARTS_SKIP") }, skip: "PARTS_SKIP=1"},
		{name: "misspelt", ask: "yes", f: func(t testing.TB) { Asked(t, Chromium, "PARTS_SKIP") }, fatal: `PARTS_SKIP="yes"`},
		{name: "not asked", ask: "0", f: func(t testing.TB) { Asked(t, Chromium, "PARTS_SKIP") }},
	} {
		t.Setenv("CI", c.ci)
		t.Setenv("PARTS_SKIP", c.ask)
		e := run(c.f)
		if !has(e.fatal, c.fatal) || !has(e.skip, c.skip) {
			t.Errorf("%s: fatal %q, skip %q; want fatal ~%q, skip ~%q", c.name, e.fatal, e.skip, c.fatal, c.skip)
		}
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	want := "missing\tgitea\tTestSomething/sub\t" + missing.Error() + "\n" +
		"missing\topencode\tTestSomething/sub\t" + missing.Error() + "\n" +
		"asked\tchromium\tTestSomething/sub\tPARTS_SKIP=1: the tests that need chromium are skipped\n" +
		"asked\tchromium\tTestSomething/sub\tPARTS_SKIP=1: the tests that need chromium are skipped\n"
	if string(b) != want {
		t.Errorf("summary file:\n%s\nwant:\n%s", b, want)
	}
}

func has(msg, want string) bool {
	if want == "" {
		return msg == ""
	}
	return strings.Contains(msg, want)
}

// TestProvokedSkipsAreAside: a test that sets CI itself (a test of a kit's
// skip rule) provokes the skips it checks; it calls Aside, or make test's
// summary would count them as missing parts under CI=true, where nothing
// may be missing.
func TestProvokedSkipsAreAside(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		// This package's own test sets CI around a summary file of its own.
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") || filepath.Dir(p) == filepath.Join(root, "internal", "testkit", "parts") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), `Setenv("CI"`) && !strings.Contains(string(b), "parts.Aside(t)") {
			t.Errorf("%s sets CI in a test but never calls parts.Aside(t): its provoked skips are counted as missing parts", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
