package apitest_test

// The end-to-end benchmark: tickets through the template pipeline
// (implement → review → verify → integrate), the agent stages answered at
// once by in-process runners over the runner HTTP API, the merge stage on a
// branch that is merged at once. It measures tickets completed per second
// and the time from `ready` to started (flows.started_at). Targets on
// SQLite: ≥ 100 tickets/s, start latency p99 ≤ 1 s.
//
//	go test -run '^$' -bench 'BenchmarkEndToEnd' -benchtime 1x ./internal/testkit/apitest/
//
// Every iteration of b.N is one full drain of a fresh Core on a fresh
// store (set-up excluded from the timer), so -benchtime 1x is all it needs;
// without it the first drain already takes longer than the default 1 s
// and b.N stays 1.
//
// Sub-benchmarks:
//
//   - burst: every ticket is created `ready` while the scheduler is off;
//     at t0 the scheduler starts and the clock runs until every flow is
//     done. tickets/s = tickets / elapsed; burst_start_p50/p99_ms are the
//     times from t0 to each flow's start (how fast a burst is admitted).
//   - stream=R: tickets are created in `backlog` and moved to `ready` by
//     PATCH at R per second during the run; start_p50/p99_ms are
//     flows.started_at − the ticket's updated_at in the PATCH answer (both
//     Core's clock, ms): the start latency the target is about. tickets/s
//     is capped by R here.
//
// cpu_cores and cpu_ms/ticket are the CPU time during the drain of the
// process (Core and the harness) and of the git processes it ran, not of
// rqlited, from /proc/self/stat: on a shared machine tickets/s swings with
// the neighbours' load, CPU per ticket much less.
//
// The merge stage: BenchmarkEndToEnd and BenchmarkEndToEndRqlite install
// apitest.FakeForge (every branch pushed and merged when asked), so that
// they measure Ballet, not git processes. BenchmarkEndToEndRealGit keeps
// the plain-git forge on a real bare repository where the harness has
// pushed and merged every ticket's branch before the clock starts
// (pushMerged), so the merge stage finds it merged at its first check.
//
// BALLET_E2E_DIAG=1 (with -v) logs a breakdown of every drain: each hop of
// a ticket (p50/p99/max), handler time per job kind, how busy the
// orchestrator's slots were, the queues, the harness's HTTP timings and the
// applier's lost races.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// e2eOptions is one benchmark configuration.
type e2eOptions struct {
	engine    string  // "sqlite" or "rqlite"
	tickets   int     // tickets through the pipeline per iteration
	jobs      int     // jobs.concurrency of the orchestrator
	runners   int     // in-process runners (goroutines), each registered on its own
	limit     int     // the project's concurrency_limit (0: no limit)
	readyRate float64 // tickets/s moved to ready during the run; 0: all ready before t0 (burst)
	realGit   bool    // plain-git forge on a real bare repository instead of FakeForge
}

// e2eResult is what one drain measured.
type e2eResult struct {
	elapsed time.Duration
	cpu     time.Duration   // CPU time of the whole process (Core and harness) during the drain; 0 if unknown
	starts  []time.Duration // per ticket: ready (or t0 for a burst) → flow started
}

// BenchmarkEndToEnd: 1,000 tickets on SQLite, FakeForge merges, no project
// concurrency limit unless named. burst/jobs=8/runners=8 is the issue's
// configuration (job concurrency 8 is the default); the others show what
// more handler slots, more runners and a project limit of 50 change, and
// the start latency above (200/s) and below (30/s) the throughput Core
// sustains.
func BenchmarkEndToEnd(b *testing.B) {
	for _, o := range []e2eOptions{
		{readyRate: 0, jobs: 8, runners: 8},
		{readyRate: 0, jobs: 16, runners: 8},
		{readyRate: 0, jobs: 16, runners: 16},
		{readyRate: 0, jobs: 8, runners: 8, limit: 50},
		{readyRate: 200, jobs: 8, runners: 8},
		{readyRate: 200, jobs: 16, runners: 16},
		{readyRate: 30, jobs: 8, runners: 8},
	} {
		o.engine, o.tickets = "sqlite", 1000
		b.Run(o.name(), func(b *testing.B) { benchE2E(b, o) })
	}
}

// BenchmarkEndToEndRqlite: 200 tickets on a one-node rqlite, FakeForge
// merges.
func BenchmarkEndToEndRqlite(b *testing.B) {
	for _, o := range []e2eOptions{
		{readyRate: 0, jobs: 8, runners: 8},
		{readyRate: 0, jobs: 16, runners: 16},
		{readyRate: 20, jobs: 8, runners: 8},
	} {
		o.engine, o.tickets = "rqlite", 200
		b.Run(o.name(), func(b *testing.B) { benchE2E(b, o) })
	}
}

// BenchmarkEndToEndRealGit: 100 tickets on SQLite with the real plain-git
// forge (git processes for every merge check), beside the same 100 tickets
// with FakeForge, to show what git costs.
func BenchmarkEndToEndRealGit(b *testing.B) {
	for _, realGit := range []bool{true, false} {
		for _, o := range []e2eOptions{
			{readyRate: 0, jobs: 8, runners: 8},
			{readyRate: 20, jobs: 8, runners: 8},
		} {
			o.engine, o.tickets, o.realGit = "sqlite", 100, realGit
			forge := "fake"
			if realGit {
				forge = "git"
			}
			b.Run("forge="+forge+"/"+o.name(), func(b *testing.B) { benchE2E(b, o) })
		}
	}
}

func (o e2eOptions) name() string {
	mode := "burst"
	if o.readyRate > 0 {
		mode = fmt.Sprintf("stream=%g", o.readyRate)
	}
	name := fmt.Sprintf("%s/jobs=%d/runners=%d", mode, o.jobs, o.runners)
	if o.limit > 0 {
		name += fmt.Sprintf("/limit=%d", o.limit)
	}
	return name
}

func benchE2E(b *testing.B, o e2eOptions) {
	b.ReportAllocs()
	var total, cpu time.Duration
	var starts []time.Duration
	b.StopTimer()
	for range b.N {
		r := runE2E(b, o) // starts and stops the timer around the drain
		total += r.elapsed
		cpu += r.cpu
		starts = append(starts, r.starts...)
	}
	b.ReportMetric(float64(o.tickets*b.N)/total.Seconds(), "tickets/s")
	if cpu > 0 { // the machine may be shared: CPU per ticket is the steadier figure
		b.ReportMetric(cpu.Seconds()/total.Seconds(), "cpu_cores")
		b.ReportMetric(ms(cpu)/float64(o.tickets*b.N), "cpu_ms/ticket")
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	prefix := "start_"
	if o.readyRate == 0 {
		prefix = "burst_start_"
	}
	b.ReportMetric(ms(percentile(starts, 0.50)), prefix+"p50_ms")
	b.ReportMetric(ms(percentile(starts, 0.99)), prefix+"p99_ms")
	b.ReportMetric(ms(percentile(starts, 1)), prefix+"max_ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runE2E sets up a fresh Core, drains o.tickets tickets through the
// template pipeline with the benchmark timer running, and stops it all.
func runE2E(b *testing.B, o e2eOptions) e2eResult {
	b.Helper()
	s := storetest.Open(b, o.engine)
	dir := b.TempDir()
	e := apitest.New(b, s, func(c *config.Config) {
		c.Jobs.Poll.Duration = 20 * time.Millisecond
		c.Jobs.Concurrency = o.jobs
		c.Storage.Path = dir + "/core.db" // the git mirror cache lives next to it
	})
	var races *raceCounter
	if os.Getenv("BALLET_E2E_DIAG") != "" {
		races = &raceCounter{Store: e.Core.Applier.Store}
		e.Core.Applier.Store = races // before anything runs
	}
	repoURL := "/srv/git/acme.git"
	var repo *apitest.GitRepo
	fake := &apitest.FakeForge{}
	if o.realGit {
		repo = apitest.NewGitRepo(b)
		repoURL = repo.Bare
	} else {
		e.UseForge(fake)
	}
	e.Org("acme")
	e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme", "concurrency_limit": o.limit,
		"repository": map[string]any{"forge": "git", "url": repoURL, "default_branch": "main"}})

	state := "ready"
	if o.readyRate > 0 {
		state = "backlog"
	}
	keys := make([]string, o.tickets)
	index := make(map[string]int, o.tickets)
	for i := range keys {
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": fmt.Sprintf("ticket %d", i),
			"acceptance_criteria": "it works", "state": state}).JSON(b, &it)
		keys[i], index[it.Key] = it.Key, i
	}
	if repo != nil {
		pushMerged(b, repo.Bare, keys)
	}

	hc := &client{url: e.URL, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	defer hc.hc.CloseIdleConnections()
	errs := make(chan error, o.runners+o.tickets+2)

	// Runners, waiting in their long polls before the clock starts.
	runCtx, stopRunners := context.WithCancel(context.Background())
	var runnersWG sync.WaitGroup
	for i := range o.runners {
		rn := e.NewRunner(fmt.Sprintf("bench-%d", i))
		runnersWG.Add(1)
		go func() {
			defer runnersWG.Done()
			if err := hc.runner(runCtx, rn); err != nil && runCtx.Err() == nil {
				errs <- fmt.Errorf("runner %d: %w", i, err)
			}
		}()
	}
	defer func() { stopRunners(); runnersWG.Wait() }()

	// Core's leader loops: the orchestrator now (nothing is due yet), the
	// scheduler at t0 for a burst and before the stream otherwise.
	coreCtx, stopCore := context.WithCancel(context.Background())
	var coreWG sync.WaitGroup
	startLoop := func(run func(context.Context)) {
		coreWG.Add(1)
		go func() { defer coreWG.Done(); run(coreCtx) }()
	}
	defer func() { stopCore(); coreWG.Wait() }()
	startLoop(e.Core.Jobs.Run)
	if o.readyRate > 0 {
		startLoop(e.Core.Scheduler.Run)
	}
	apitest.Await(b, "the runners in their long polls", func() bool { return e.Core.Runs.Waiting() == o.runners })

	readyAt := make([]int64, o.tickets) // unix ms, Core's clock
	feedCtx, stopFeed := context.WithCancel(context.Background())
	var feedWG sync.WaitGroup
	defer func() { stopFeed(); feedWG.Wait() }()

	var smp *sampler
	if os.Getenv("BALLET_E2E_DIAG") != "" {
		smp = startSampler(e, s, o.jobs)
		defer smp.stop()
	}
	load := loadAverage()
	cpu0 := processCPU()
	b.StartTimer()
	t0 := time.Now()
	if o.readyRate == 0 {
		for i := range readyAt {
			readyAt[i] = t0.UnixMilli()
		}
		startLoop(e.Core.Scheduler.Run)
	} else {
		feedWG.Add(1)
		go func() {
			defer feedWG.Done()
			if err := hc.feed(feedCtx, keys, o.readyRate, t0, readyAt); err != nil && feedCtx.Err() == nil {
				errs <- fmt.Errorf("feed: %w", err)
			}
		}()
	}
	elapsed := awaitDone(b, s, o.tickets, errs, 5*time.Minute)
	b.StopTimer()
	cpu := processCPU() - cpu0
	if cpu0 == 0 {
		cpu = 0
	}
	if smp != nil {
		smp.stop()
	}

	stopFeed()
	feedWG.Wait()
	stopRunners()
	runnersWG.Wait()
	stopCore()
	coreWG.Wait()
	checkDrained(b, s, o, fake)
	if os.Getenv("BALLET_E2E_DIAG") != "" {
		b.Logf("load average before: %s, after: %s\n%s%s%s%s", load, loadAverage(), diagnose(b, e, s), smp, hc.timings(), races)
	}

	rows, err := s.Query(context.Background(), `SELECT i.key, f.started_at FROM flows f JOIN items i ON i.id = f.item_id`)
	if err != nil {
		b.Fatal(err)
	}
	res := e2eResult{elapsed: elapsed, cpu: cpu, starts: make([]time.Duration, 0, rows.Len())}
	for i := range rows.Len() {
		var key string
		var started int64
		if err := rows.Scan(i, &key, &started); err != nil {
			b.Fatal(err)
		}
		k, ok := index[key]
		if !ok || readyAt[k] == 0 {
			b.Fatalf("flow of %s: no ready time recorded", key)
		}
		res.starts = append(res.starts, time.Duration(started-readyAt[k])*time.Millisecond)
	}
	return res
}

// processCPU is the CPU time (user + system) of the process and of the
// children it has waited for (git) from /proc/self/stat: fields 14 to 17,
// in clock ticks of 1/100 s. 0 where there is no /proc.
func processCPU() time.Duration {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(raw), ") ") // the command name may hold spaces
	f := strings.Fields(rest)
	if !ok || len(f) < 15 {
		return 0
	}
	var total int64
	for _, field := range f[11:15] {
		var n int64
		if _, err := fmt.Sscan(field, &n); err != nil {
			return 0
		}
		total += n
	}
	return time.Duration(total) * 10 * time.Millisecond
}

// loadAverage is the first three fields of /proc/loadavg ("?" elsewhere):
// the benchmark shares the machine.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// awaitDone polls the flows until n are done and returns the time since
// it was called; a failed or stopped flow, a harness error or the timeout
// fails the benchmark.
func awaitDone(b *testing.B, s store.Store, n int, errs <-chan error, timeout time.Duration) time.Duration {
	b.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-errs:
			b.Fatalf("after %v: %v\n%s", time.Since(start), err, statusReport(s))
		case <-tick.C:
		}
		rows, err := s.Query(context.Background(), `SELECT COUNT(*), COALESCE(SUM(status IN ('failed', 'stopped')), 0) FROM flows WHERE status IN ('done', 'failed', 'stopped')`)
		if err != nil {
			b.Fatal(err)
		}
		var ended, bad int
		if err := rows.Scan(0, &ended, &bad); err != nil {
			b.Fatal(err)
		}
		if bad > 0 {
			b.Fatalf("%d flows failed or stopped\n%s", bad, statusReport(s))
		}
		if ended >= n {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			b.Fatalf("only %d of %d flows done after %v\n%s", ended, n, timeout, statusReport(s))
		}
	}
}

// statusReport counts flows, runs and jobs by status, for a failure.
func statusReport(s store.Store) string {
	var sb strings.Builder
	for _, q := range []string{
		`SELECT 'flows', status || '/' || COALESCE(waiting, '') || '/' || stage, COUNT(*) FROM flows GROUP BY 2`,
		`SELECT 'runs', status, COUNT(*) FROM runs GROUP BY 2`,
		`SELECT 'jobs', kind || '/' || status, COUNT(*) FROM jobs GROUP BY 2`,
		`SELECT 'items', state, COUNT(*) FROM items GROUP BY 2`,
	} {
		rows, err := s.Query(context.Background(), q)
		if err != nil {
			fmt.Fprintf(&sb, "%s: %v\n", q, err)
			continue
		}
		for i := range rows.Len() {
			var what, key string
			var n int
			if err := rows.Scan(i, &what, &key, &n); err == nil {
				fmt.Fprintf(&sb, "  %s %s: %d\n", what, key, n)
			}
		}
	}
	return sb.String()
}

// checkDrained checks that every ticket went the whole way: done, three
// runs succeeded, one merge check each, nothing dead.
func checkDrained(b *testing.B, s store.Store, o e2eOptions, fake *apitest.FakeForge) {
	b.Helper()
	rows, err := s.Query(context.Background(), `SELECT
    (SELECT COUNT(*) FROM items WHERE state = 'done'),
    (SELECT COUNT(*) FROM runs WHERE status = 'succeeded'),
    (SELECT COUNT(*) FROM runs),
    (SELECT COUNT(*) FROM jobs WHERE status = 'dead')`)
	if err != nil {
		b.Fatal(err)
	}
	var items, runsDone, runs, dead int
	if err := rows.Scan(0, &items, &runsDone, &runs, &dead); err != nil {
		b.Fatal(err)
	}
	if items != o.tickets || runsDone != 3*o.tickets || runs != 3*o.tickets || dead != 0 {
		b.Fatalf("after the drain: %d tickets done, %d of %d runs succeeded (want %d), %d dead jobs\n%s",
			items, runsDone, runs, 3*o.tickets, dead, statusReport(s))
	}
	if !o.realGit && fake.States.Load() != int64(o.tickets) {
		b.Fatalf("%d merge checks for %d tickets", fake.States.Load(), o.tickets)
	}
}

// diagnose breaks a drain down (BALLET_E2E_DIAG=1): the median and p99 of
// each hop of a ticket, from the flows and runs tables, and the handler
// time of each job kind and of the scheduler's passes, from /metrics.
func diagnose(b *testing.B, e *apitest.Env, s store.Store) string {
	rows, err := s.Query(context.Background(), `SELECT f.id, f.started_at, f.finished_at, r.step, r.created_at, r.started_at, r.finished_at
FROM flows f JOIN runs r ON r.flow_id = f.id ORDER BY f.id, r.step`)
	if err != nil {
		b.Fatal(err)
	}
	hops := map[string][]time.Duration{}
	var order []string
	add := func(name string, from, to int64) {
		if _, ok := hops[name]; !ok {
			order = append(order, name)
		}
		hops[name] = append(hops[name], time.Duration(to-from)*time.Millisecond)
	}
	var prevFlow string
	var prevFinished int64
	for i := range rows.Len() {
		var flow string
		var fStarted, fFinished, created, started, finished int64
		var step int
		if err := rows.Scan(i, &flow, &fStarted, &fFinished, &step, &created, &started, &finished); err != nil {
			b.Fatal(err)
		}
		if flow != prevFlow {
			add("flow started → run 1 created (flow.enter)", fStarted, created)
		} else {
			add(fmt.Sprintf("run %d finished → run %d created (flow.run_finished + flow.enter)", step-1, step), prevFinished, created)
		}
		add(fmt.Sprintf("run %d created → leased (runner pickup)", step), created, started)
		add(fmt.Sprintf("run %d leased → finished (report + finish)", step), started, finished)
		if step == 3 {
			add("run 3 finished → flow done (run_finished + enter + merge)", finished, fFinished)
		}
		prevFlow, prevFinished = flow, finished
	}
	var sb strings.Builder
	sb.WriteString("hops (p50 / p99 / max ms):\n")
	for _, name := range order {
		d := hops[name]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		fmt.Fprintf(&sb, "  %-70s %6.0f %6.0f %6.0f\n", name, ms(percentile(d, 0.5)), ms(percentile(d, 0.99)), ms(percentile(d, 1)))
	}
	metrics := string(e.Must(200, "", "GET", "/metrics", nil).Body)
	sums, counts := map[string]float64{}, map[string]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(val, &v); err != nil {
			continue
		}
		for _, m := range []string{"ballet_job_duration_seconds", "ballet_scheduler_pass_seconds"} {
			if k, ok := strings.CutPrefix(name, m+"_sum"); ok {
				sums[m+k] = v
			} else if k, ok := strings.CutPrefix(name, m+"_count"); ok {
				counts[m+k] = v
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sb.WriteString("handlers (count, mean ms, total s):\n")
	for _, k := range keys {
		if counts[k] > 0 {
			fmt.Fprintf(&sb, "  %-70s %6.0f %6.1f %6.1f\n", k, counts[k], 1000*sums[k]/counts[k], sums[k])
		}
	}
	return sb.String()
}

// raceCounter counts the applier's batches and lost races by the type of
// their first event (BALLET_E2E_DIAG=1).
type raceCounter struct {
	store.Store
	mu           sync.Mutex
	batches, los map[string]int
}

func (r *raceCounter) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	res, err := r.Store.Exec(ctx, batch...)
	typ := "?"
	if len(batch) > 0 && strings.HasPrefix(batch[0].SQL, "INSERT INTO events") && len(batch[0].Args) > 6 {
		typ = fmt.Sprint(batch[0].Args[6])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batches == nil {
		r.batches, r.los = map[string]int{}, map[string]int{}
	}
	r.batches[typ]++
	if errors.Is(err, store.ErrLostRace) {
		r.los[typ]++
	}
	return res, err
}

func (r *raceCounter) String() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	types := make([]string, 0, len(r.batches))
	for t := range r.batches {
		types = append(types, t)
	}
	sort.Strings(types)
	var sb strings.Builder
	sb.WriteString("applier batches by first event (count, lost races):\n")
	for _, t := range types {
		fmt.Fprintf(&sb, "  %-30s %6d %6d\n", t, r.batches[t], r.los[t])
	}
	return sb.String()
}

// sampler watches the drain (BALLET_E2E_DIAG=1): the orchestrator's busy
// handlers every 2 ms, the queues every 50 ms.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	slots  int

	busy, full, n                   int
	due, queued, running, queueRead int
}

func startSampler(e *apitest.Env, s store.Store, slots int) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	smp := &sampler{cancel: cancel, done: make(chan struct{}), slots: slots}
	go func() {
		defer close(smp.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r := e.Core.Jobs.Running()
			smp.busy += r
			if r >= slots {
				smp.full++
			}
			smp.n++
			if i%25 != 0 {
				continue
			}
			rows, err := s.Query(ctx, `SELECT (SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND run_at <= ?),
    (SELECT COUNT(*) FROM runs WHERE status = 'queued'), (SELECT COUNT(*) FROM flows WHERE status = 'running')`, time.Now().UnixMilli())
			if err != nil {
				continue
			}
			var due, queued, running int
			if rows.Scan(0, &due, &queued, &running) == nil {
				smp.due, smp.queued, smp.running, smp.queueRead = smp.due+due, smp.queued+queued, smp.running+running, smp.queueRead+1
			}
		}
	}()
	return smp
}

func (smp *sampler) stop() {
	smp.once.Do(func() { smp.cancel(); <-smp.done })
}

func (smp *sampler) String() string {
	if smp == nil || smp.n == 0 || smp.queueRead == 0 {
		return ""
	}
	return fmt.Sprintf("orchestrator: %.1f of %d handlers busy on average, all busy %.0f%% of the time\n"+
		"queues on average: %.0f due pending jobs, %.0f queued runs, %.0f running flows\n",
		float64(smp.busy)/float64(smp.n), smp.slots, 100*float64(smp.full)/float64(smp.n),
		float64(smp.due)/float64(smp.queueRead), float64(smp.queued)/float64(smp.queueRead), float64(smp.running)/float64(smp.queueRead))
}

// client calls Core's HTTP API from the harness goroutines (which must not
// call testing's Fatal): errors are returned. It times its calls by route.
type client struct {
	url string
	hc  *http.Client

	mu    sync.Mutex
	sum   map[string]time.Duration
	count map[string]int
}

func (c *client) observe(route string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sum == nil {
		c.sum, c.count = map[string]time.Duration{}, map[string]int{}
	}
	c.sum[route] += d
	c.count[route]++
}

func (c *client) timings() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	routes := make([]string, 0, len(c.count))
	for r := range c.count {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	var sb strings.Builder
	sb.WriteString("HTTP calls of the harness (count, mean ms):\n")
	for _, r := range routes {
		fmt.Fprintf(&sb, "  %-30s %6d %6.1f\n", r, c.count[r], ms(c.sum[r])/float64(c.count[r]))
	}
	return sb.String()
}

// do sends a JSON request and decodes a JSON answer into out (when not nil
// and the answer has a body).
func (c *client) do(ctx context.Context, token, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	began := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	route := method + " " + path[strings.LastIndexByte(path, '/')+1:]
	if method == "PATCH" {
		route = "PATCH item"
	}
	c.observe(fmt.Sprintf("%s %d", route, resp.StatusCode), time.Since(began))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %s: %w", method, path, raw, err)
		}
	}
	return resp.StatusCode, nil
}

// runner leases runs with a long poll and completes each one "done" at
// once (report, then finish), as the Runner process will, until ctx ends.
func (c *client) runner(ctx context.Context, rn *apitest.Runner) error {
	for ctx.Err() == nil {
		var l struct {
			Run      struct{ ID string }
			RunToken string `json:"run_token"`
		}
		status, err := c.do(ctx, rn.Token, "POST", "/api/v1/runners/"+rn.ID+"/lease", map[string]any{"wait_seconds": 10}, &l)
		if err != nil {
			return err
		}
		if status == http.StatusNoContent {
			continue
		}
		if _, err := c.do(ctx, l.RunToken, "POST", "/api/v1/runs/"+l.Run.ID+"/report", map[string]any{"outcome": "done", "summary": "ok"}, nil); err != nil {
			return err
		}
		if _, err := c.do(ctx, rn.Token, "POST", "/api/v1/runs/"+l.Run.ID+"/finish", map[string]any{"exit_status": 0,
			"usage": map[string]any{"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01}}, nil); err != nil {
			return err
		}
	}
	return nil
}

// feed moves keys[i] from backlog to ready at t0 + i/rate (a few PATCHes
// in flight at most) and records each ticket's updated_at from the answer:
// the moment Core made it ready.
func (c *client) feed(ctx context.Context, keys []string, rate float64, t0 time.Time, readyAt []int64) error {
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i, key := range keys {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var it struct {
				UpdatedAt time.Time `json:"updated_at"`
			}
			_, err := c.do(ctx, apitest.BootstrapToken, "PATCH", "/api/v1/items/"+key, map[string]any{"version": 1, "state": "ready"}, &it)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			readyAt[i] = it.UpdatedAt.UnixMilli()
		}()
	}
	wg.Wait()
	return first
}

// pushMerged stands in for the agents and the humans of a plain-git forge:
// before the clock starts, one git fast-import gives each ticket's branch
// (ballet/KEY) a commit of its own, chained on main, and fast-forwards main
// to the last one: every branch is pushed and merged, so the merge stage
// finds it merged at its first check and the drain times only Ballet's own
// git work (ls-remote, cat-file, merge-base per check).
func pushMerged(b *testing.B, bare string, keys []string) {
	b.Helper()
	gitEnv := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := exec.Command("git", "--git-dir="+bare, "rev-parse", "refs/heads/main").CombinedOutput()
	if err != nil {
		b.Fatalf("git rev-parse main: %v\n%s", err, out)
	}
	var in strings.Builder
	when := time.Now().Unix()
	for i, key := range keys {
		msg := "work on " + key
		fmt.Fprintf(&in, "commit refs/heads/ballet/%s\nmark :%d\ncommitter t <t@example.com> %d +0000\ndata %d\n%s\n", key, i+1, when, len(msg), msg)
		if i == 0 {
			fmt.Fprintf(&in, "from %s\n\n", strings.TrimSpace(string(out)))
		} else {
			fmt.Fprintf(&in, "from :%d\n\n", i)
		}
	}
	fmt.Fprintf(&in, "reset refs/heads/main\nfrom :%d\n\n", len(keys))
	cmd := exec.Command("git", "--git-dir="+bare, "fast-import", "--quiet")
	cmd.Env = gitEnv
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, out)
	}
}
