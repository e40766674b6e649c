package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/parts"
)

// fakeTB records how Need ended a test: Fatalf and Skipf stop it like the
// real ones do (here by a panic that outcome recovers).
type fakeTB struct {
	testing.TB
	fatal, skip string
}

type stopped struct{}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "TestFake" }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// outcome runs Need on a fake test.
func outcome(check func(context.Context) error) (f *fakeTB) {
	f = &fakeTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	Need(f, check)
	return f
}

// TestNeed: no sandbox fails the test under CI=true, naming the reason and
// how to skip, and skips it elsewhere (counted); BALLET_SKIP_SANDBOX=1
// skips, whatever the machine has.
func TestNeed(t *testing.T) {
	parts.Aside(t) // the skips below are provoked, not missing parts
	noSandbox := func(context.Context) error { return errors.New("bwrap is not installed") }
	sandbox := func(context.Context) error { return nil }
	for _, c := range []struct {
		name      string
		skipEnv   string
		ci        string
		check     func(context.Context) error
		wantFatal []string
		wantSkip  string
	}{
		{name: "sandbox", check: sandbox},
		{name: "no sandbox", ci: "true", check: noSandbox, wantFatal: []string{"bwrap is not installed", "BALLET_SKIP_SANDBOX=1"}},
		{name: "no sandbox, not CI", ci: "false", check: noSandbox, wantSkip: "bwrap is not installed"},
		{name: "no sandbox, CI unset", check: noSandbox, wantSkip: "bubblewrap is missing"},
		{name: "skip asked", skipEnv: "1", check: noSandbox, wantSkip: "BALLET_SKIP_SANDBOX=1"},
		{name: "skip asked, sandbox", skipEnv: "1", check: sandbox, wantSkip: "BALLET_SKIP_SANDBOX=1"},
		{name: "skip not asked", skipEnv: "0", ci: "true", check: noSandbox, wantFatal: []string{"bwrap is not installed"}},
		{name: "skip misspelt", skipEnv: "yes", check: sandbox, wantFatal: []string{`BALLET_SKIP_SANDBOX="yes"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(SkipEnv, c.skipEnv)
			t.Setenv("CI", c.ci)
			f := outcome(c.check)
			for _, w := range c.wantFatal {
				if !strings.Contains(f.fatal, w) {
					t.Errorf("fatal %q, want it to contain %q (skip %q)", f.fatal, w, f.skip)
				}
			}
			if len(c.wantFatal) == 0 && f.fatal != "" {
				t.Errorf("fatal %q, want none", f.fatal)
			}
			if c.wantSkip != "" && !strings.Contains(f.skip, c.wantSkip) {
				t.Errorf("skip %q, want %q (fatal %q)", f.skip, c.wantSkip, f.fatal)
			}
			if c.wantSkip == "" && f.skip != "" {
				t.Errorf("skipped (%q), want no skip", f.skip)
			}
		})
	}
}
