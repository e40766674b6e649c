package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/procgroup"
)

// Status is what became of a mutant.
type Status string

// The statuses. A mutant is detected when killed or timed out; one that
// lived shows what no test checks.
const (
	Killed     Status = "killed"      // a test failed
	Lived      Status = "lived"       // every test passed
	TimedOut   Status = "timed out"   // the tests did not finish
	NotCovered Status = "not covered" // no test runs the code: not run
	NotViable  Status = "not viable"  // the mutant does not compile
	ToRun      Status = "to run"      // covered, in a dry run
)

// pkg is one package under test: its folder, import path and Go files of
// this platform (test files excluded).
type pkg struct {
	Dir        string
	ImportPath string
	GoFiles    []string

	baseline time.Duration // the unmutated tests' wall time
	cover    []block       // covered blocks (count > 0) per file
	uncover  []block       // blocks no test ran
}

// block is a coverage block of a file, from line.col to line.col.
type block struct {
	file                     string // base name
	line0, col0, line1, col1 int
}

func (b block) contains(file string, line, col int) bool {
	return b.file == file &&
		(line > b.line0 || line == b.line0 && col >= b.col0) &&
		(line < b.line1 || line == b.line1 && col <= b.col1)
}

// load finds a package with go list.
func load(dir string) (*pkg, error) {
	cmd := exec.Command("go", "list", "-json=Dir,ImportPath,GoFiles", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w%s", dir, err, stderr(err))
	}
	var p pkg
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("go list in %s: %w", dir, err)
	}
	return &p, nil
}

// covered reports whether some test ran the code at the mutant; a
// position outside every block (a package-level constant) counts as
// covered, since it cannot be told.
func (p *pkg) covered(m *Mutant) bool {
	file := filepath.Base(m.File)
	for _, b := range p.cover {
		if b.contains(file, m.Line, m.Col) {
			return true
		}
	}
	for _, b := range p.uncover {
		if b.contains(file, m.Line, m.Col) {
			return false
		}
	}
	return true
}

// runner builds and runs a package's tests, mutated or not.
type runner struct {
	env     []string // added to the environment of the tests
	factor  float64  // a mutant's tests get factor × the baseline …
	minTime time.Duration
	work    string   // scratch folder
	jail    []string // the command that runs a test binary in its own PID namespace, or nil
}

// baseline runs the unmutated tests with coverage; they must pass.
func (r *runner) baseline(ctx context.Context, p *pkg) error {
	bin := filepath.Join(r.work, "baseline.test")
	if out, err := r.goCmd(ctx, p, "test", "-c", "-cover", "-covermode=set", "-o", bin, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("build the tests of %s: %w\n%s", p.ImportPath, err, out)
	}
	profile := filepath.Join(r.work, "cover.out")
	start := time.Now()
	out, err := r.testCmd(ctx, p, bin, time.Hour, "-test.coverprofile="+profile).CombinedOutput()
	p.baseline = time.Since(start)
	if err != nil {
		return fmt.Errorf("the tests of %s fail without any mutant: %w\n%s", p.ImportPath, err, out)
	}
	return p.readProfile(profile)
}

func (p *pkg) readProfile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// importpath/file.go:l0.c0,l1.c1 statements count
		line := sc.Text()
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "mode:") || filepath.Dir(name) != p.ImportPath {
			continue
		}
		var b block
		var stmts, count int
		if _, err := fmt.Sscanf(rest, "%d.%d,%d.%d %d %d", &b.line0, &b.col0, &b.line1, &b.col1, &stmts, &count); err != nil {
			return fmt.Errorf("coverage profile line %q: %w", line, err)
		}
		b.file = filepath.Base(name)
		if count > 0 {
			p.cover = append(p.cover, b)
		} else {
			p.uncover = append(p.uncover, b)
		}
	}
	return sc.Err()
}

// run builds the tests with the mutant in place and runs them.
func (r *runner) run(ctx context.Context, p *pkg, m *Mutant, worker int) (Status, error) {
	dir := filepath.Join(r.work, "w"+strconv.Itoa(worker))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.ReadFile(m.File)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mutant.test")
	ok, err := r.build(ctx, p, m.File, m.Apply(src), dir, bin)
	if err != nil {
		return "", err
	}
	if !ok {
		return NotViable, nil
	}
	limit := time.Duration(float64(p.baseline) * r.factor)
	limit = max(limit, r.minTime)
	cmd := r.testCmd(ctx, p, bin, limit, "-test.failfast")
	err = runGroup(ctx, cmd, limit+5*time.Second) // the test binary's own -test.timeout fires first
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut, nil
	case err == nil:
		return Lived, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return Killed, nil
	}
	return "", err
}

// build compiles the tests with src in place of file into bin (an
// -overlay: the source tree is never touched). A mutant that only left a
// variable or import unused is repaired (see repair) and built again. It
// reports false when the mutant does not compile.
func (r *runner) build(ctx context.Context, p *pkg, file string, src []byte, dir, bin string) (bool, error) {
	mutated := filepath.Join(dir, filepath.Base(file))
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {file: mutated}})
	if err != nil {
		return false, err
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return false, err
	}
	for range 3 {
		if err := os.WriteFile(mutated, src, 0o644); err != nil {
			return false, err
		}
		out, err := r.goCmd(ctx, p, "test", "-c", "-overlay="+overlayPath, "-o", bin, ".").CombinedOutput()
		if err == nil {
			return true, nil
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ctx.Err() != nil {
			return false, err
		}
		var ok bool
		if src, ok = repair(file, src, string(out)); !ok {
			return false, nil
		}
	}
	return false, nil
}

func (r *runner) goCmd(ctx context.Context, p *pkg, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = p.Dir
	return cmd
}

// testCmd runs a test binary as go test would: in the package's folder.
// Its -test.timeout makes a hanging mutant fail with a timeout report.
func (r *runner) testCmd(ctx context.Context, p *pkg, bin string, limit time.Duration, args ...string) *exec.Cmd {
	args = append([]string{"-test.count=1", "-test.timeout=" + limit.String()}, args...)
	if len(r.jail) > 0 {
		args = append(append(append([]string{}, r.jail[1:]...), bin), args...)
		bin = r.jail[0]
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), r.env...)
	return cmd
}

// runGroup runs cmd in its own process group and kills the whole group
// after limit (or when ctx ends), returning context.DeadlineExceeded then.
// A test binary that panics on its -test.timeout prints "panic: test timed
// out"; that counts as a timeout too.
func runGroup(ctx context.Context, cmd *exec.Cmd, limit time.Duration) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	procgroup.Own(cmd, syscall.SIGKILL) // a timeout kills what its tests started too
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil && strings.Contains(out.String(), "panic: test timed out after") {
			return context.DeadlineExceeded
		}
		return err
	case <-timer.C:
		procgroup.Kill(cmd)
		<-done
		return context.DeadlineExceeded
	case <-ctx.Done():
		procgroup.Kill(cmd)
		<-done
		return ctx.Err()
	}
}

func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// pidJail is the command that runs a test binary in a PID namespace of its
// own, with its own /proc, so that a mutant of the code that kills process
// groups (runner/proc: a flipped pgid check, a negated mark) reaches only
// the processes of its own tests, never the rest of the machine's (as
// root, one such mutant killed every process it could see). It is
// bubblewrap sharing everything else (files, devices, network); nil when
// isolation is off.
func pidJail(isolate bool) ([]string, error) {
	if !isolate {
		return nil, nil
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("-isolate: no bubblewrap (bwrap) on PATH to run the tests in their own PID namespace (apt-get install bubblewrap), or -isolate=false: %w", err)
	}
	return []string{bwrap, "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--"}, nil
}
