// Package parts is the test kits' one rule for the real parts a test needs
// (Gitea, rqlited, Chromium, bubblewrap, Mailpit, each agent CLI on its own): every
// kit that finds a part ends a test without it here, so that no test
// passes by skipping unnoticed.
//
//   - A part that is missing (not installed, not built, a build without what
//     it needs next to it) fails the test under CI=true, naming the part
//     and how to get it. Elsewhere the test is skipped, the skip printed
//     (go test -v) and counted.
//   - A developer who asks (the part's BALLET_SKIP_… variable set to 1)
//     skips the tests that need it; that is counted too.
//
// The counts go to the file $BALLET_SKIP_SUMMARY names (one line a skip:
// kind, part, test, reason; appended, so that every test binary of one
// go test run writes to it); make test prints them as one summary line,
// "skipped for missing parts: gitea=3 chromium=1" (or "none"), and a
// "skipped on request: …" line when a developer asked.
package parts

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// SummaryEnv names the file skips are counted in.
const SummaryEnv = "BALLET_SKIP_SUMMARY"

// Kinds of skip.
const (
	KindMissing = "missing" // the part is not there (a failure under CI=true)
	KindAsked   = "asked"   // a developer asked with BALLET_SKIP_…=1
)

// The parts, as the summary names them.
const (
	Gitea      = "gitea"
	Rqlite     = "rqlited"
	Chromium   = "chromium"
	Bubblewrap = "bubblewrap"
	ClaudeCode = "claude-code"
	OpenCode   = "opencode"
	Mailpit    = "mailpit"
)

// CI tells whether the tests run under CI (CI=true), where a missing part
// is a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// Asked skips the test when the part's skip variable env is 1 (counted as
// asked); "" and "0" let it go on; any other value fails it.
func Asked(t testing.TB, part, env string) {
	t.Helper()
	switch v := os.Getenv(env); v {
	case "1":
		why := fmt.Sprintf("%s=1: the tests that need %s are skipped", env, part)
		record(KindAsked, part, t.Name(), why)
		t.Skipf("%s: %s", part, why)
	case "", "0":
	default:
		t.Fatalf("%s=%q: set it to 1 to skip the tests that need %s, or leave it unset", env, v, part)
	}
}

// Missing ends a test whose part is missing, for the reason err gives
// (which says how to get the part): a failure under CI=true, else a
// printed, counted skip.
func Missing(t testing.TB, part string, err error) {
	t.Helper()
	if CI() {
		t.Fatalf("%s is missing, and under CI=true a missing part fails the test: %v", part, err)
	}
	record(KindMissing, part, t.Name(), err.Error())
	t.Skipf("%s is missing (a failure under CI=true; counted in make test's summary): %v", part, err)
}

// Aside keeps the skips a test provokes on purpose out of make test's
// summary: a test of a kit's skip rule (it sets CI or a BALLET_SKIP_…
// variable itself) calls it first, so that only the parts really missing
// are counted. The skips still end the test as they would.
func Aside(t testing.TB) {
	t.Helper()
	t.Setenv(SummaryEnv, "")
}

func record(kind, part, test, why string) {
	path := os.Getenv(SummaryEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "parts: counting a skip in %s: %v\n", path, err)
		return
	}
	defer f.Close()
	clean := strings.NewReplacer("\t", " ", "\n", " ")
	// One write of one line: appends of several test binaries do not mix.
	if _, err := f.WriteString(kind + "\t" + part + "\t" + clean.Replace(test) + "\t" + clean.Replace(why) + "\n"); err != nil {
		fmt.Fprintf(os.Stderr, "parts: counting a skip in %s: %v\n", path, err)
	}
}
