package failuretest

import (
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/agenttest"
	"github.com/ballet/ballet/internal/testkit/giteatest"
)

var binary string

// testTag is the build tag of the suite's binary: Ballet merges on its
// plain-git forge (gitforge.Merging).
const testTag = "ballet_testforge"

// isTestBuild checks that a ballet binary was built with testTag.
func isTestBuild(path string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return err
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), testTag) {
			return nil
		}
	}
	return fmt.Errorf("%s was not built with -tags %s: Ballet would not merge, and the suite would not see its merges", path, testTag)
}

func TestMain(m *testing.M) {
	if os.Getenv(RunnerEnv) != "" {
		os.Exit(RunnerMain())
	}
	flag.Parse()
	if testing.Short() { // TestFailureSuite skips: no binary needed
		os.Exit(giteatest.Main(m))
	}
	if binary = os.Getenv("BALLET_FAILURETEST_BINARY"); binary != "" { // a prebuilt ballet, e.g. of an older commit
		if err := isTestBuild(binary); err != nil {
			fmt.Fprintf(os.Stderr, "BALLET_FAILURETEST_BINARY: %v\n", err)
			os.Exit(2)
		}
		os.Exit(giteatest.Main(m))
	}
	dir, err := os.MkdirTemp("", "ballet-failuretest")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "ballet")
	if out, err := exec.Command("go", "build", "-tags", testTag, "-o", binary, "github.com/ballet/ballet/cmd/ballet").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := giteatest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestFailureSuite runs the failure suite (ADR-0016 "Validation") on
// SQLite and on a three-node rqlite cluster: the real binary and a runner
// process over many tickets, killed at every pipeline step, at random, the
// runner mid-run and (rqlite) the cluster's leader once; and the real
// runner with claude-code (internal/testkit/agenttest) over the agent tickets, it
// and its sessions' agent CLIs killed mid-work at every agent stage. See
// Run.
//
// BALLET_SKIP_AGENTS=1 runs it without the agent tickets;
// BALLET_FAILURETEST_SEED repeats a run's random choices;
// BALLET_FAILURETEST_LOGS keeps the logs in that folder;
// BALLET_FAILURETEST_BINARY runs a prebuilt ballet (built with -tags
// ballet_testforge) instead of building one;
// BALLET_FAILURETEST_LIMIT sets the project's concurrency limit (8);
// BALLET_FAILURETEST_SUMMARY appends the summary lines to that file.
func TestFailureSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the failure suite takes minutes")
	}
	var seed uint64
	if v := os.Getenv("BALLET_FAILURETEST_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("BALLET_FAILURETEST_SEED: %v", err)
		}
		seed = n
	}
	for _, engine := range []string{"sqlite", "rqlite"} {
		t.Run(engine, func(t *testing.T) {
			o := Options{Engine: engine, Binary: binary, Seed: seed}
			if os.Getenv(agenttest.SkipEnv) != "1" {
				o.Claude = agenttest.Claude(t)
			} else {
				t.Logf("%s=1: the suite runs without its agent tickets (project %s)", agenttest.SkipEnv, Agents)
			}
			if os.Getenv(giteatest.SkipEnv) != "1" {
				o.Gitea = giteatest.Shared(t)
			} else {
				t.Logf("%s=1: the suite runs without its Gitea tickets (project %s)", giteatest.SkipEnv, OnGitea)
			}
			if v := os.Getenv("BALLET_FAILURETEST_LIMIT"); v != "" {
				o.Limit, _ = strconv.Atoi(v)
			}
			if dir := os.Getenv("BALLET_FAILURETEST_LOGS"); dir != "" {
				o.LogDir = filepath.Join(dir, fmt.Sprintf("%s-%d", engine, os.Getpid()))
			}
			Run(t, o)
		})
	}
}
