package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMakeTestNeedsRqlited runs the repository's Makefile with fake go,
// gofmt and scripts: make test fails when rqlited cannot be built, passes
// the built path to the tests, and skips the build only when asked
// (BALLET_SKIP_RQLITE=1) or given a binary (BALLET_RQLITED); make bench
// needs it too. (TestMakeRunDoesNotBuildRqlited: make run never does.)
func TestMakeTestNeedsRqlited(t *testing.T) {
	for _, c := range []struct {
		name, target string
		env          []string
		buildFails   bool
		wantOK       bool
		wantBuild    bool   // scripts/rqlited.sh ran
		wantGo       string // a line the fake go logged, "" for none
	}{
		{name: "build fails", target: "test", buildFails: true, wantBuild: true},
		{name: "build works", target: "test", wantOK: true, wantBuild: true,
			wantGo: " ./... rqlited=/built/rqlited skip_rqlite="},
		{name: "skip asked", target: "test", env: []string{"BALLET_SKIP_RQLITE=1"}, buildFails: true, wantOK: true,
			wantGo: " ./... rqlited= skip_rqlite=1"},
		{name: "binary given", target: "test", env: []string{"BALLET_RQLITED=/given/rqlited"}, buildFails: true, wantOK: true,
			wantGo: " ./... rqlited=/given/rqlited skip_rqlite="},
		{name: "bench build fails", target: "bench", buildFails: true, wantBuild: true},
		{name: "bench", target: "bench", wantOK: true, wantBuild: true, wantGo: "go run . rqlited=/built/rqlited skip_rqlite="},
	} {
		t.Run(c.name, func(t *testing.T) {
			var scripts fakeScripts
			if c.buildFails {
				scripts.rqlited = "echo 'build failed' >&2\nexit 1\n"
			}
			out, log, err := runMake(t, c.target, scripts, c.env)
			if (err == nil) != c.wantOK {
				t.Errorf("make %s: %v, want success %v\n%s", c.target, err, c.wantOK, out)
			}
			if ran := strings.Contains(log, "rqlited.sh\n"); ran != c.wantBuild {
				t.Errorf("scripts/rqlited.sh ran: %v, want %v; calls:\n%s", ran, c.wantBuild, log)
			}
			if c.wantGo != "" && !strings.Contains(log, c.wantGo+" ") {
				t.Errorf("calls lack %q:\n%s", c.wantGo, log)
			}
			if !c.wantOK {
				if strings.Contains(log, "go test") || strings.Contains(log, "go run") {
					t.Errorf("tests or benchmarks ran although make failed:\n%s", log)
				}
				if !strings.Contains(out, "BALLET_SKIP_RQLITE=1") {
					t.Errorf("the failure does not say how to skip:\n%s", out)
				}
			}
		})
	}
}

// TestMakeTestNeedsGitea: make test builds Gitea (in the background, while
// the rest is prepared) and hands its path to the tests; a failed build
// stops make before any test runs, saying how to skip; BALLET_SKIP_GITEA=1
// or a given BALLET_GITEA skips the build.
func TestMakeTestNeedsGitea(t *testing.T) {
	for _, c := range []struct {
		name       string
		env        []string
		buildFails bool
		wantOK     bool
		wantBuild  bool
		wantGo     string
	}{
		{name: "build fails", buildFails: true, wantBuild: true},
		{name: "build works", wantOK: true, wantBuild: true, wantGo: "gitea=/built/gitea skip_gitea="},
		{name: "skip asked", env: []string{"BALLET_SKIP_GITEA=1"}, buildFails: true, wantOK: true, wantGo: "gitea= skip_gitea=1"},
		{name: "binary given", env: []string{"BALLET_GITEA=/given/gitea"}, buildFails: true, wantOK: true, wantGo: "gitea=/given/gitea skip_gitea="},
	} {
		t.Run(c.name, func(t *testing.T) {
			var scripts fakeScripts
			if c.buildFails {
				scripts.gitea = "echo 'build failed' >&2\nexit 1\n"
			}
			out, log, err := runMake(t, "test", scripts, c.env)
			if (err == nil) != c.wantOK {
				t.Errorf("make test: %v, want success %v\n%s", err, c.wantOK, out)
			}
			if ran := strings.Contains(log, "gitea.sh\n"); ran != c.wantBuild {
				t.Errorf("scripts/gitea.sh ran: %v, want %v; calls:\n%s", ran, c.wantBuild, log)
			}
			var testLine string
			for _, l := range strings.Split(log, "\n") {
				if isTestRun(l) {
					testLine = l
				}
			}
			if c.wantGo != "" && !strings.Contains(testLine, c.wantGo+" ") {
				t.Errorf("the tests' call %q lacks %q:\n%s", testLine, c.wantGo, log)
			}
			if !c.wantOK {
				if testLine != "" {
					t.Errorf("tests ran although the Gitea build failed:\n%s", log)
				}
				if !strings.Contains(out, "BALLET_SKIP_GITEA=1") {
					t.Errorf("the failure does not say how to skip:\n%s", out)
				}
			}
		})
	}
}

// TestMakeTestPreparesThePartsSideBySide: make test builds rqlited while
// the agent CLIs install (and Gitea builds): the fake rqlited build
// finishes only once the CLI install has started, which it never would if
// the parts were prepared one after the other.
func TestMakeTestPreparesThePartsSideBySide(t *testing.T) {
	scripts := fakeScripts{
		agents: "touch agents.started\n" + fakeScripts{}.withDefaults().agents,
		rqlited: "i=0; while [ ! -e agents.started ]; do i=$((i+1)); " +
			"if [ $i -gt 200 ]; then echo 'the CLI install never started' >&2; exit 1; fi; sleep 0.05; done\n" +
			"echo /built/rqlited\n",
	}
	out, log, err := runMake(t, "test", scripts, nil)
	if err != nil {
		t.Fatalf("make test: %v\n%s", err, out)
	}
	if !strings.Contains(log, "rqlited=/built/rqlited") || !strings.Contains(log, "claude=/cache/claude") {
		t.Errorf("the tests did not get both parts:\n%s", log)
	}
}

// TestMakeTestStartsTheLongestFirst: go test starts packages in the order
// it is given them, and the failure suite, the API suite and the UI suite
// take minutes: listed first, they run while the short packages fill the
// other slots, instead of starting last (./... is alphabetical) and making
// the whole run wait on them.
func TestMakeTestStartsTheLongestFirst(t *testing.T) {
	out, log, err := runMake(t, "test", fakeScripts{}, nil)
	if err != nil {
		t.Fatalf("make test: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(log, "\n") {
		if isTestRun(l) {
			line = l
		}
	}
	all := strings.Index(line, " ./... ")
	for _, pkg := range []string{"./internal/testkit/failuretest", "./internal/testkit/apitest", "./internal/testkit/uitest"} {
		if i := strings.Index(line, " "+pkg+" "); i < 0 || i > all {
			t.Errorf("the tests' call does not list %s before ./...: %q", pkg, line)
		}
	}
}

// TestMakeTestFuzzes: make test runs every fuzz target (beside the tests)
// and fails, saying so, when one fails, even though the tests passed.
func TestMakeTestFuzzes(t *testing.T) {
	for _, fails := range []bool{false, true} {
		var env []string
		if fails {
			env = []string{"FAKE_FUZZ_FAILS=1"}
		}
		out, log, err := runMake(t, "test", fakeScripts{}, env)
		if (err != nil) != fails {
			t.Errorf("fuzz fails %v: make test: %v\n%s", fails, err, out)
		}
		if !strings.Contains(log, "go test -run=^$ -fuzz=^FuzzParseItem$ -fuzztime=20000x ./internal/keys") {
			t.Errorf("fuzz fails %v: FuzzParseItem not run:\n%s", fails, log)
		}
		if fails && (!strings.Contains(out, "make fuzz failed") || !strings.Contains(out, "found a failing input")) {
			t.Errorf("the fuzz failure is not reported:\n%s", out)
		}
	}
}

// TestMakeTestVets: make test runs go vet (beside the tests) and fails,
// showing the finding, when vet fails.
func TestMakeTestVets(t *testing.T) {
	for _, fails := range []bool{false, true} {
		var env []string
		if fails {
			env = []string{"FAKE_VET_FAILS=1"}
		}
		out, log, err := runMake(t, "test", fakeScripts{}, env)
		if (err != nil) != fails {
			t.Errorf("vet fails %v: make test: %v\n%s", fails, err, out)
		}
		if !strings.Contains(log, "go vet ./...") {
			t.Errorf("vet fails %v: go vet not run:\n%s", fails, log)
		}
		if fails && (!strings.Contains(out, "make vet failed") || !strings.Contains(out, "a finding")) {
			t.Errorf("the vet failure is not reported:\n%s", out)
		}
	}
}

// TestMakeTestNeedsChromium: make test checks for the browser the UI tests
// drive ($BALLET_CHROMIUM, else /usr/bin/chromium) and fails before any test
// runs without it, saying how to skip; BALLET_SKIP_BROWSER=1 skips the
// check, and the tests get the variables.
func TestMakeTestNeedsChromium(t *testing.T) {
	for _, c := range []struct {
		name   string
		env    []string
		wantOK bool
		wantGo string
	}{
		{name: "missing", env: []string{"BALLET_CHROMIUM=/nowhere/chromium"}},
		{name: "present", wantOK: true, wantGo: "skip_browser="},
		{name: "skip asked", env: []string{"BALLET_CHROMIUM=/nowhere/chromium", "BALLET_SKIP_BROWSER=1"}, wantOK: true,
			wantGo: "chromium=/nowhere/chromium skip_browser=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, log, err := runMake(t, "test", fakeScripts{}, c.env)
			if (err == nil) != c.wantOK {
				t.Errorf("make test: %v, want success %v\n%s", err, c.wantOK, out)
			}
			var testLine string
			for _, l := range strings.Split(log, "\n") {
				if isTestRun(l) {
					testLine = l
				}
			}
			if c.wantGo != "" && !strings.Contains(testLine, c.wantGo) {
				t.Errorf("the tests' call %q lacks %q:\n%s", testLine, c.wantGo, log)
			}
			if !c.wantOK {
				if testLine != "" {
					t.Errorf("tests ran without Chromium:\n%s", log)
				}
				if !strings.Contains(out, "BALLET_SKIP_BROWSER=1") || !strings.Contains(out, "/nowhere/chromium") {
					t.Errorf("the failure does not name the browser and how to skip:\n%s", out)
				}
			}
		})
	}
}

// TestMakeTestInstallsAxe: the browser tests run axe-core from
// web/node_modules; on a fresh clone (none there) make test installs it
// from the lock file before any test runs, and not again once it is there;
// BALLET_SKIP_BROWSER=1 does not install it.
func TestMakeTestInstallsAxe(t *testing.T) {
	for _, c := range []struct {
		name    string
		noAxe   bool
		env     []string
		wantNpm bool
	}{
		{name: "fresh clone", noAxe: true, wantNpm: true},
		{name: "installed", noAxe: false},
		{name: "skip asked", noAxe: true, env: []string{"BALLET_SKIP_BROWSER=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, log, err := runMake(t, "test", fakeScripts{noAxe: c.noAxe}, c.env)
			if err != nil {
				t.Fatalf("make test: %v\n%s", err, out)
			}
			npm := strings.Index(log, "npm ci")
			if (npm >= 0) != c.wantNpm {
				t.Fatalf("npm ci run: %v, want %v:\n%s", npm >= 0, c.wantNpm, log)
			}
			if npm >= 0 && (!strings.Contains(log, "npm ci --no-audit --no-fund --loglevel=error in web") || npm > strings.Index(log, "go test")) {
				t.Errorf("npm ci not run in web/ before the tests:\n%s", log)
			}
		})
	}
}

// TestMakeTestPrintsTheSkips: make test counts every skip the test
// binaries record (a part missing outside CI, a BALLET_SKIP_… ask) and
// prints them per part at the end, "none" when nothing was skipped.
func TestMakeTestPrintsTheSkips(t *testing.T) {
	for _, c := range []struct {
		name, skips string
		want        []string
		not         string
	}{
		{name: "none", want: []string{"skipped for missing parts: none"}, not: "skipped on request"},
		{name: "some", skips: `missing\tgitea\tTestA\tnot found\nmissing\topencode\tTestB/opencode\tno executable\n` +
			`missing\tgitea\tTestC\tno -static\nasked\tchromium\tTestD\tBALLET_SKIP_BROWSER=1\n`,
			want: []string{"skipped for missing parts: gitea=2 opencode=1", "skipped on request: chromium=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := runMake(t, "test", fakeScripts{skips: c.skips}, nil)
			if err != nil {
				t.Fatalf("make test: %v\n%s", err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w+"\n") {
					t.Errorf("make test's output lacks %q:\n%s", w, out)
				}
			}
			if c.not != "" && strings.Contains(out, c.not) {
				t.Errorf("make test's output has %q:\n%s", c.not, out)
			}
		})
	}
}

// fakeScripts are the bodies of the fake scripts/rqlited.sh and
// scripts/agent-clis.sh and scripts/gitea.sh runMake writes; "" is one
// that succeeds (/built/rqlited; /cache/claude and /cache/opencode;
// /built/gitea).
type fakeScripts struct {
	rqlited, agents, gitea string
	mailpit                string
	// skips are the lines the fake go test writes into $BALLET_SKIP_SUMMARY
	// (printf format).
	skips string
	// noAxe leaves web/node_modules out, as in a fresh clone: the fake npm
	// (which logs "npm ARGS" and installs axe-core) must be run.
	noAxe bool
}

// isTestRun tells whether a line of the calls log is make test's run of
// the whole suite.
func isTestRun(line string) bool {
	return strings.HasPrefix(line, "go test -count=1 -timeout 25m ") && strings.Contains(line, " ./... ")
}

// withDefaults fills the scripts left "" with ones that succeed.
func (f fakeScripts) withDefaults() fakeScripts {
	if f.rqlited == "" {
		f.rqlited = "echo /built/rqlited\n"
	}
	if f.agents == "" {
		f.agents = "echo \"BALLET_CLAUDE='/cache/claude'\"\necho \"BALLET_OPENCODE='/cache/opencode'\"\n"
	}
	if f.gitea == "" {
		f.gitea = "echo /built/gitea\n"
	}
	if f.mailpit == "" {
		f.mailpit = "echo /built/mailpit\n"
	}
	return f
}

// runMake runs `make TARGET` on a copy of the repository's Makefile in a
// temporary folder, with a fake go and gofmt on PATH and fake scripts, so
// nothing is built, installed or tested for real. The environment is the
// test's without what would change the Makefile's choices, plus env. It
// returns make's output and the calls log: one line per script run
// ("rqlited.sh", "agent-clis.sh") and per go call ("go ARGS" followed by the
// variables the Makefile hands to the tests). BALLET_CHROMIUM names a fake
// browser unless env sets it.
func runMake(t *testing.T, target string, scripts fakeScripts, env []string) (out, log string, err error) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is required (apt-get install make): %v", err)
	}
	makefile, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "calls.log")
	scripts = scripts.withDefaults()
	for name, content := range map[string]string{
		"Makefile":              string(makefile),
		"scripts/gitea.sh":      "#!/bin/sh\necho gitea.sh >> " + logPath + "\n" + scripts.gitea,
		"scripts/rqlited.sh":    "#!/bin/sh\necho rqlited.sh >> " + logPath + "\n" + scripts.rqlited,
		"scripts/agent-clis.sh": "#!/bin/sh\necho agent-clis.sh >> " + logPath + "\n" + scripts.agents,
		"scripts/mailpit.sh":    "#!/bin/sh\necho mailpit.sh >> " + logPath + "\n" + scripts.mailpit,
		"bin/gofmt":             "#!/bin/sh\n",
		"bin/go": "#!/bin/sh\n" + `echo "go $* rqlited=${BALLET_RQLITED:-} skip_rqlite=${BALLET_SKIP_RQLITE:-}` +
			` claude=${BALLET_CLAUDE:-} opencode=${BALLET_OPENCODE:-} skip_agents=${BALLET_SKIP_AGENTS:-}` +
			` gitea=${BALLET_GITEA:-} skip_gitea=${BALLET_SKIP_GITEA:-}` +
			` chromium=${BALLET_CHROMIUM:-} skip_browser=${BALLET_SKIP_BROWSER:-} mailpit=${BALLET_MAILPIT:-} skip_mailpit=${BALLET_SKIP_MAILPIT:-} " >> ` + logPath + "\n" +
			// the test binaries' skips (internal/testkit/parts), as a go test run counts them
			`if [ "$1" = test ] && [ -n "${BALLET_SKIP_SUMMARY:-}" ]; then printf '` + scripts.skips + `' >> "$BALLET_SKIP_SUMMARY"; fi` + "\n" +
			// FAKE_FUZZ_FAILS=1: every fuzz run fails; FAKE_VET_FAILS=1: go vet fails
			`case "$*" in *-fuzz=*) if [ -n "${FAKE_FUZZ_FAILS:-}" ]; then echo "fuzz: found a failing input"; exit 1; fi;; esac` + "\n" +
			`if [ "$1" = vet ] && [ -n "${FAKE_VET_FAILS:-}" ]; then echo "vet: x.go:1: a finding"; exit 1; fi` + "\n",
		"bin/chromium": "#!/bin/sh\n",
		"bin/npm": "#!/bin/sh\n" + `echo "npm $* in ${PWD##*/}" >> ` + logPath + "\n" +
			"mkdir -p node_modules/axe-core && : > node_modules/axe-core/axe.min.js\n",
		"bench/.keep":      "",
		"web/package.json": "{}",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !scripts.noAxe {
		axe := filepath.Join(dir, "web", "node_modules", "axe-core", "axe.min.js")
		if err := os.MkdirAll(filepath.Dir(axe), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(axe, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("make", "--no-print-directory", target)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "BALLET_RQLITED", "BALLET_SKIP_RQLITE", "BALLET_CLAUDE", "BALLET_OPENCODE", "BALLET_SKIP_AGENTS",
			"BALLET_GITEA", "BALLET_SKIP_GITEA", "BALLET_MAILPIT", "BALLET_SKIP_MAILPIT", "BALLET_CHROMIUM", "BALLET_SKIP_BROWSER",
			"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PATH",
			// the outer make test's counts: the fake go test's skips
			// (every fuzz run of the inner make writes them) are not
			// this suite's, and were counted as 44 missing parts
			"BALLET_SKIP_SUMMARY", "BALLET_FAILURETEST_SUMMARY":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, "BALLET_CHROMIUM="+filepath.Join(dir, "bin", "chromium"))
	cmd.Env = append(cmd.Env, env...) // a later value wins
	b, err := cmd.CombinedOutput()
	calls, _ := os.ReadFile(logPath)
	return string(b), string(calls), err
}

// TestEveryFuzzTargetIsFuzzed: make fuzz runs exactly the repository's
// fuzz targets. go test -fuzz passes when its pattern matches no target, so
// a renamed target would silently stop being fuzzed, and a new one not
// listed would never be.
func TestEveryFuzzTargetIsFuzzed(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := fuzzTargets(string(makefile))
	if len(listed) == 0 {
		t.Fatal("the Makefile lists no FUZZ_TARGETS")
	}
	var found []string
	r := root(t)
	err = filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != r && (d.Name() == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r, filepath.Dir(p))
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				found = append(found, filepath.ToSlash(rel)+":"+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if !slices.Contains(listed, f) {
			t.Errorf("fuzz target %s is not in the Makefile's FUZZ_TARGETS: make fuzz never runs it", f)
		}
	}
	for _, l := range listed {
		if !slices.Contains(found, l) {
			t.Errorf("the Makefile's FUZZ_TARGETS lists %s, which is no fuzz target: go test -fuzz would pass without fuzzing", l)
		}
	}
}

// fuzzTargets returns the package:Target words of the Makefile's
// FUZZ_TARGETS, continuation lines included.
func fuzzTargets(makefile string) []string {
	_, rest, ok := strings.Cut(makefile, "\nFUZZ_TARGETS :=")
	if !ok {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(rest, "\n") {
		cont := strings.HasSuffix(strings.TrimSpace(line), "\\")
		for _, w := range strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "\\")) {
			out = append(out, w)
		}
		if !cont {
			break
		}
	}
	return out
}

// TestMakeTestNeedsMailpit: make test builds Mailpit (scripts/mailpit.sh)
// beside the other parts and hands its path to the tests; a failed build
// stops make before any test runs, saying how to skip; BALLET_SKIP_MAILPIT=1
// or a given BALLET_MAILPIT skips the build.
func TestMakeTestNeedsMailpit(t *testing.T) {
	for _, c := range []struct {
		name       string
		env        []string
		buildFails bool
		wantOK     bool
		wantBuild  bool
		wantGo     string
	}{
		{name: "build fails", buildFails: true, wantBuild: true},
		{name: "build works", wantOK: true, wantBuild: true, wantGo: "mailpit=/built/mailpit skip_mailpit="},
		{name: "skip asked", env: []string{"BALLET_SKIP_MAILPIT=1"}, buildFails: true, wantOK: true, wantGo: "mailpit= skip_mailpit=1"},
		{name: "binary given", env: []string{"BALLET_MAILPIT=/given/mailpit"}, buildFails: true, wantOK: true, wantGo: "mailpit=/given/mailpit skip_mailpit="},
	} {
		t.Run(c.name, func(t *testing.T) {
			var scripts fakeScripts
			if c.buildFails {
				scripts.mailpit = "echo 'build failed' >&2\nexit 1\n"
			}
			out, log, err := runMake(t, "test", scripts, c.env)
			if (err == nil) != c.wantOK {
				t.Errorf("make test: %v, want success %v\n%s", err, c.wantOK, out)
			}
			if ran := strings.Contains(log, "mailpit.sh\n"); ran != c.wantBuild {
				t.Errorf("scripts/mailpit.sh ran: %v, want %v; calls:\n%s", ran, c.wantBuild, log)
			}
			var testLine string
			for _, l := range strings.Split(log, "\n") {
				if isTestRun(l) {
					testLine = l
				}
			}
			if c.wantGo != "" && !strings.Contains(testLine, c.wantGo+" ") {
				t.Errorf("the tests' call %q lacks %q:\n%s", testLine, c.wantGo, log)
			}
			if !c.wantOK && (testLine != "" || !strings.Contains(out, "BALLET_SKIP_MAILPIT=1")) {
				t.Errorf("a failed Mailpit build: tests ran (%q) or the output does not say how to skip:\n%s", testLine, out)
			}
		})
	}
}
