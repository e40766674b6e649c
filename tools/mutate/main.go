// Command mutate is Ballet's mutation-testing tool. It plants one small bug
// (a mutant) at a time in a package's code and runs that package's own
// tests against it: a mutant the tests do not notice ("lived") is a
// behaviour no test checks. The source tree is never modified (each mutant
// is built with go test -overlay), and mutants in code that no test runs
// are reported as not covered without running anything.
//
// Usage (make mutation runs the core packages; docs/testing.md):
//
//	go run ./tools/mutate [-workers 1] [-engines sqlite] [-out report.txt] ./internal/transition …
//
// It is a measuring tool, not a gate: it is in neither make test nor CI.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

type options struct {
	workers int
	factor  float64
	minTime time.Duration
	engines string
	classes []string
	match   string
	dry     bool
	out     string
	isolate bool
}

func run(args []string, stdout, progress io.Writer) error {
	var o options
	var classList string
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.IntVar(&o.workers, "workers", 1, "mutants built and tested at once")
	fs.Float64Var(&o.factor, "factor", 3, "a mutant's tests may take factor × the unmutated tests' time …")
	fs.DurationVar(&o.minTime, "min", 30*time.Second, "… and at least this long, before they count as timed out")
	fs.StringVar(&o.engines, "engines", "sqlite", "BALLET_ENGINES for the tests (storetest.Each); empty: every engine")
	fs.StringVar(&classList, "classes", strings.Join(classes, ","), "the mutators to use")
	fs.StringVar(&o.match, "match", "", "only mutants whose file:line contains this")
	fs.BoolVar(&o.dry, "dry", false, "list the mutants and their coverage; run nothing")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.BoolVar(&o.isolate, "isolate", true, "run each test binary in its own PID namespace (bubblewrap), so a mutant that kills processes reaches only its own")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("name the package folders to mutate, e.g. ./internal/transition")
	}
	if o.workers < 1 {
		return fmt.Errorf("-workers %d: must be at least 1", o.workers)
	}
	for c := range strings.SplitSeq(classList, ",") {
		if !slices.Contains(classes, c) {
			return fmt.Errorf("-classes: unknown mutator %q (known: %s)", c, strings.Join(classes, ", "))
		}
		o.classes = append(o.classes, c)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := os.MkdirTemp("", "ballet-mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	jail, err := pidJail(o.isolate)
	if err != nil {
		return err
	}
	r := &runner{factor: o.factor, minTime: o.minTime, work: work, jail: jail}
	if o.engines != "" {
		r.env = append(r.env, "BALLET_ENGINES="+o.engines)
	}

	var results []result
	for _, dir := range fs.Args() {
		res, err := mutatePackage(ctx, r, o, dir, progress)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	var report strings.Builder
	writeReport(&report, results)
	fmt.Fprint(stdout, report.String())
	if o.out != "" {
		return os.WriteFile(o.out, []byte(report.String()), 0o644)
	}
	return nil
}

// result is one package's mutants after the run.
type result struct {
	name     string
	baseline time.Duration
	mutants  []*Mutant
}

func mutatePackage(ctx context.Context, r *runner, o options, dir string, progress io.Writer) (result, error) {
	p, err := load(dir)
	if err != nil {
		return result{}, err
	}
	res := result{name: dir}
	for _, name := range p.GoFiles {
		path := filepath.Join(p.Dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return res, err
		}
		ms, err := Mutants(path, src)
		if err != nil {
			return res, err
		}
		for _, m := range ms {
			if slices.Contains(o.classes, m.Class) && strings.Contains(m.where(), o.match) {
				res.mutants = append(res.mutants, m)
			}
		}
	}
	fmt.Fprintf(progress, "%s: %d mutants; running the unmutated tests with coverage …\n", dir, len(res.mutants))
	if err := r.baseline(ctx, p); err != nil {
		return res, err
	}
	res.baseline = p.baseline
	fmt.Fprintf(progress, "%s: the tests pass in %s\n", dir, p.baseline.Round(time.Millisecond))

	todo := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards errs and the progress output
	var errs []error
	done := 0
	for w := range o.workers {
		wg.Go(func() {
			for i := range todo {
				m := res.mutants[i]
				switch {
				case !p.covered(m):
					m.Status = NotCovered
				case o.dry:
					m.Status = ToRun
				default:
					st, err := r.run(ctx, p, m, w)
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s: %w", m.where(), err))
						mu.Unlock()
						continue
					}
					m.Status = st
				}
				mu.Lock()
				done++
				fmt.Fprintf(progress, "[%d/%d] %-11s %s\n", done, len(res.mutants), m.Status, m)
				mu.Unlock()
			}
		})
	}
	for i := range res.mutants {
		if ctx.Err() != nil {
			break
		}
		todo <- i
	}
	close(todo)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(errs) > 0 {
		return res, errs[0]
	}
	return res, nil
}

// where is the mutant's position relative to the working folder.
func (m *Mutant) where() string {
	path := m.File
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, m.File); err == nil {
			path = rel
		}
	}
	return fmt.Sprintf("%s:%d:%d", path, m.Line, m.Col)
}

func (m *Mutant) String() string {
	return fmt.Sprintf("%s %s: %s → %s", m.where(), m.Class, quote(m.From), quote(m.To))
}

// quote shows a code fragment on one line, shortened.
func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "…"
	}
	return "`" + s + "`"
}

func writeReport(w io.Writer, results []result) {
	fmt.Fprintf(w, "%-28s %7s %7s %7s %7s %7s %7s %8s %8s\n",
		"package", "mutants", "killed", "t/out", "lived", "no cov", "no comp", "score", "covered")
	total := result{name: "total"}
	for _, r := range results {
		total.mutants = append(total.mutants, r.mutants...)
	}
	for _, r := range append(results, total) {
		n := counts(r.mutants)
		fmt.Fprintf(w, "%-28s %7d %7d %7d %7d %7d %7d %8s %8s\n", r.name, len(r.mutants),
			n[Killed], n[TimedOut], n[Lived], n[NotCovered], n[NotViable],
			percent(n[Killed]+n[TimedOut], n[Killed]+n[TimedOut]+n[Lived]+n[NotCovered]),
			percent(n[Killed]+n[TimedOut], n[Killed]+n[TimedOut]+n[Lived]))
	}
	fmt.Fprintln(w, "\nscore: (killed + timed out) / (all but not compiling); covered: the same without the not covered")
	for _, st := range []Status{Lived, NotCovered, TimedOut} {
		var list []string
		for _, m := range total.mutants {
			if m.Status == st {
				list = append(list, m.String())
			}
		}
		if len(list) > 0 {
			fmt.Fprintf(w, "\n%s (%d):\n  %s\n", st, len(list), strings.Join(list, "\n  "))
		}
	}
}

func counts(ms []*Mutant) map[Status]int {
	n := map[Status]int{}
	for _, m := range ms {
		n[m.Status]++
	}
	return n
}

func percent(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}
