// Command bench measures Ballet's storage, transition and job paths against
// River (github.com/riverqueue/river with its SQLite driver) in one run on one
// machine, and Ballet on rqlite clusters. It is its own module so that the
// product's go.mod stays free of River; run it from the repository root with
//
//	cd bench && go run . [flags]
//
// Every SQLite measurement gets a fresh database file in a fresh temporary
// folder, opened with the same settings for both systems: WAL,
// synchronous=NORMAL, busy_timeout=10000, foreign_keys=ON and BEGIN
// IMMEDIATE transactions. See README.md for what each figure means.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	only         map[string]bool
	duration     time.Duration
	warmup       int
	writers      int
	slots        int
	jobs         int
	jobsRiverDef int
	jobsRqlite   int
	samples      int
	pause        time.Duration
	jitter       time.Duration
	riverConns   int
	dir          string
	rqlited      string
	jsonPath     string
	cpuProfile   string
	verbose      bool
}

func parseFlags() (*options, error) {
	o := &options{}
	only := flag.String("only", "", "run only these groups, comma-separated: sqlite (Ballet on SQLite), river, rqlite (Ballet on rqlite), each optionally narrowed to one section with :tx, :jobs or :latency (e.g. sqlite:jobs); default all")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "length of each transition / insert throughput measurement")
	flag.IntVar(&o.warmup, "warmup", 200, "untimed operations per writer before each throughput measurement")
	flag.IntVar(&o.writers, "writers", 8, "concurrent writers in the concurrent throughput measurements")
	flag.IntVar(&o.slots, "slots", 8, "job slots: Ballet orchestrator Concurrency and River MaxWorkers")
	flag.IntVar(&o.jobs, "n", 10000, "no-op jobs drained per job-throughput measurement (Ballet SQLite, River at 1 ms cooldown)")
	flag.IntVar(&o.jobsRiverDef, "n-river-default", 1000, "no-op jobs drained by River with its default FetchCooldown (slow: ~80 jobs/s)")
	flag.IntVar(&o.jobsRqlite, "n-rqlite", 1000, "no-op jobs drained on the 3-node rqlite cluster")
	flag.IntVar(&o.samples, "samples", 300, "enqueue-to-start latency samples per system")
	flag.DurationVar(&o.pause, "pause", 20*time.Millisecond, "idle pause between latency samples (River with a longer FetchCooldown waits cooldown+10ms, so its insert-notify limiter has reset)")
	flag.DurationVar(&o.jitter, "jitter", 50*time.Millisecond, "random extra pause in [0, jitter) between latency samples, so that samples do not phase-lock with River's 50 ms notification poll")
	flag.IntVar(&o.riverConns, "river-conns", 1, "River's database/sql pool size (riversqlite's docs recommend 1)")
	flag.StringVar(&o.dir, "dir", "", "parent folder for the temporary databases and rqlite data (default: the system temp folder)")
	flag.StringVar(&o.rqlited, "rqlited", "", "rqlited binary (default $BALLET_RQLITED or ${XDG_CACHE_HOME:-~/.cache}/ballet/bin/rqlited-v8.43.4)")
	flag.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (inspect with: go tool pprof -top FILE)")
	flag.BoolVar(&o.verbose, "v", false, "log warnings from Ballet's orchestrator and River to stderr")
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	o.only = map[string]bool{}
	if *only == "" {
		*only = "sqlite,river,rqlite"
	}
	for _, g := range strings.Split(*only, ",") {
		g = strings.TrimSpace(g)
		group, section, _ := strings.Cut(g, ":")
		okGroup := group == "sqlite" || group == "river" || group == "rqlite"
		okSection := section == "" || section == "tx" || section == "jobs" || section == "latency" && group != "rqlite"
		switch {
		case g == "":
		case okGroup && okSection:
			o.only[g] = true
		default:
			return nil, fmt.Errorf("-only %q: want sqlite, river or rqlite, optionally with :tx, :jobs or :latency (rqlite: :tx, :jobs), comma-separated", g)
		}
	}
	if o.writers < 1 || o.slots < 1 || o.jobs < 1 || o.jobsRiverDef < 1 || o.jobsRqlite < 1 || o.samples < 1 || o.riverConns < 1 {
		return nil, errors.New("-writers, -slots, -n, -n-river-default, -n-rqlite, -samples and -river-conns must be at least 1")
	}
	if o.duration <= 0 {
		return nil, errors.New("-duration must be positive")
	}
	return o, nil
}

func main() {
	os.Exit(run())
}

func run() (code int) {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	// Kill every rqlited this process started: on return, on a panic in this
	// goroutine, and on SIGINT/SIGTERM. (If this process is killed with -9,
	// its rqlited processes, each in its own process group, stay: kill them
	// with pkill -f rqlited-v8.43.4.)
	defer killAll()
	defer func() {
		if r := recover(); r != nil {
			killAll()
			panic(r)
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "\nbench: %v: stopping rqlited processes\n", s)
		killAll()
		os.Exit(130)
	}()

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	root, err := os.MkdirTemp(o.dir, "ballet-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(root)

	level := slog.LevelError + 1 // silent
	if o.verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	rep := &report{
		Started:  time.Now().UTC(),
		Machine:  machine(),
		Settings: settings(o),
	}
	b := &bench{o: o, root: root, log: logger, rep: rep}
	ctx := context.Background()
	start := time.Now()
	steps := []struct {
		group, section string
		name           string
		fn             func(context.Context) error
	}{
		{"sqlite", "tx", "Ballet SQLite transitions", b.balletSQLiteTransitions},
		{"river", "tx", "River SQLite inserts", b.riverInserts},
		{"sqlite", "jobs", "Ballet SQLite job throughput", b.balletSQLiteJobs},
		{"river", "jobs", "River SQLite job throughput", b.riverJobs},
		{"sqlite", "latency", "Ballet SQLite latency", b.balletSQLiteLatency},
		{"river", "latency", "River SQLite latency", b.riverLatency},
		{"rqlite", "tx", "Ballet rqlite transitions", b.rqliteTransitions},
		{"rqlite", "jobs", "Ballet rqlite job throughput", b.rqliteJobs},
	}
	failed := false
	for _, s := range steps {
		if !o.only[s.group] && !o.only[s.group+":"+s.section] {
			continue
		}
		progress("== %s", s.name)
		if err := s.fn(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", s.name, err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", s.name, err))
			failed = true
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.Machine.LoadAvgEnd = loadAvg()
	rep.evaluate()
	rep.print(os.Stdout)
	if o.jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(o.jsonPath, append(data, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: write json:", err)
			return 1
		}
		fmt.Printf("\nJSON written to %s\n", o.jsonPath)
	}
	if failed {
		return 1
	}
	return 0
}

// bench holds what every measurement needs.
type bench struct {
	o    *options
	root string
	log  *slog.Logger
	rep  *report
	seq  int

	lastStart time.Duration // how long the last River client.Start took
}

// tempDir returns a fresh folder for one measurement's database.
func (b *bench) tempDir(name string) (string, error) {
	b.seq++
	dir := fmt.Sprintf("%s/%02d-%s", b.root, b.seq, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// idle sleeps between latency samples: at least base, plus a random
// jitter.
func (b *bench) idle(base time.Duration) {
	d := base
	if b.o.jitter > 0 {
		d += rand.N(b.o.jitter)
	}
	time.Sleep(d)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// Machine describes where the run happened.
type Machine struct {
	CPUs       int     `json:"cpus"`
	CPUModel   string  `json:"cpu_model"`
	GOOS       string  `json:"goos"`
	GOARCH     string  `json:"goarch"`
	Go         string  `json:"go"`
	Hostname   string  `json:"hostname"`
	LoadAvg1   float64 `json:"loadavg_1m_at_start"`
	LoadAvgEnd float64 `json:"loadavg_1m_at_end"`
}

func loadAvg() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f", &l)
	}
	return l
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	m.LoadAvg1 = loadAvg()
	return m
}

func settings(o *options) map[string]any {
	only := []string{}
	for g := range o.only {
		only = append(only, g)
	}
	sort.Strings(only)
	return map[string]any{
		"only":            only,
		"duration":        o.duration.String(),
		"warmup_ops":      o.warmup,
		"writers":         o.writers,
		"slots":           o.slots,
		"jobs":            o.jobs,
		"jobs_river_def":  o.jobsRiverDef,
		"jobs_rqlite":     o.jobsRqlite,
		"latency_samples": o.samples,
		"latency_pause":   o.pause.String(),
		"latency_jitter":  o.jitter.String(),
		"river_pool_size": o.riverConns,
		"sqlite":          "WAL, synchronous=NORMAL, busy_timeout=10000, foreign_keys=ON, BEGIN IMMEDIATE; fresh file per measurement",
	}
}
