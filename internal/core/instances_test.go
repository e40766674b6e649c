package core_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

const (
	envChildURLs = "BALLET_CORE_CHILD_URLS"
	leaderTTL    = 2 * time.Second
	leaderRenew  = 500 * time.Millisecond
	jobLease     = 10 * time.Minute // longer than the test: a claim comes back only by the takeover
)

func TestMain(m *testing.M) {
	if urls := os.Getenv(envChildURLs); urls != "" {
		os.Exit(coreChild(urls))
	}
	os.Exit(m.Run())
}

// coreChild runs a whole Core on rqlite with a test job kind that records
// each execution's start and end.
func coreChild(urls string) int {
	cfg := config.Default()
	cfg.Storage.Engine, cfg.Storage.URL = "rqlite", urls
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Leader.TTL.Duration, cfg.Leader.Renew.Duration = leaderTTL, leaderRenew
	cfg.Jobs.Lease.Duration, cfg.Jobs.Poll.Duration = jobLease, 50*time.Millisecond
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	st, err := rqlite.Open(ctx, rqlite.Options{URLs: strings.Split(urls, ",")}) // migrated by the test
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	c, err := core.New(core.Options{Config: cfg, Log: log, Store: &campaigns{Store: st}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	c.Jobs.Handle("work", func(ctx context.Context, j *job.Job) error {
		now := time.Now().UnixMilli()
		if _, err := c.Store.Exec(ctx, store.Stmt(`INSERT INTO executions (job_id, attempt, instance, started_at) VALUES (?, ?, ?, ?)`, j.ID, j.Attempt, c.ID, now)); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		_, err := c.Store.Exec(ctx, store.Stmt(`UPDATE executions SET finished_at = ? WHERE job_id = ? AND attempt = ?`, time.Now().UnixMilli(), j.ID, j.Attempt))
		return err
	})
	if err := c.Listen(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Printf("READY %s %s\n", c.Addr(), c.ID)
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// campaigns prints "CAMPAIGN n" on stdout after the n-th read of the
// leader lease: an instance that does not lead reads it once per campaign,
// so after "CAMPAIGN 2" its first campaign has been decided.
type campaigns struct {
	store.Store
	n atomic.Int64
}

func (c *campaigns) Query(ctx context.Context, sql string, args ...any) (*store.Rows, error) {
	rows, err := c.Store.Query(ctx, sql, args...)
	if strings.Contains(sql, "FROM leader_leases") {
		fmt.Printf("CAMPAIGN %d\n", c.n.Add(1))
	}
	return rows, err
}

type child struct {
	cmd       *exec.Cmd
	addr      string
	id        string
	campaigns atomic.Int64 // the last "CAMPAIGN n" it printed
}

func spawn(t testing.TB, urls string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildURLs+"="+urls)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("child did not start: %v", lines.Err())
	}
	f := strings.Fields(lines.Text())
	if len(f) != 3 || f[0] != "READY" {
		t.Fatalf("child did not start: %q", lines.Text())
	}
	c := &child{cmd: cmd, addr: f[1], id: f[2]}
	go func() {
		for lines.Scan() {
			var n int64
			if _, err := fmt.Sscanf(lines.Text(), "CAMPAIGN %d", &n); err == nil {
				c.campaigns.Store(n)
			}
		}
	}()
	return c
}

func (c *child) leading() bool {
	resp, err := http.Get("http://" + c.addr + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct{ Leader bool }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Leader
}

type execution struct {
	job, instance     string
	attempt           int
	started, finished int64
}

// TestTwoInstancesOneLeader: two Core processes on one rqlite cluster. Only
// the leader runs jobs; after it is killed with SIGKILL the other takes over
// and at once takes back the jobs the dead one held — long before their
// 10-minute job lease could run out — and no job ever runs twice at the
// same time. How fast the takeover is: BenchmarkTakeover.
func TestTwoInstancesOneLeader(t *testing.T) {
	t.Parallel()
	if jobLease <= apitest.HangGuard {
		t.Fatalf("the job lease (%v) must outlast the hang guard (%v): only the takeover may give claims back", jobLease, apitest.HangGuard)
	}
	ctx := context.Background()
	s, urls := leaderCluster(t)
	if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE executions (job_id TEXT, attempt INTEGER, instance TEXT, started_at INTEGER, finished_at INTEGER)`)); err != nil {
		t.Fatal(err)
	}
	a := spawn(t, urls)
	apitest.Await(t, "the first instance to lead", a.leading)
	b := spawn(t, urls)
	apitest.Await(t, "the second instance to campaign twice", func() bool { return b.campaigns.Load() >= 2 })
	if b.leading() {
		t.Fatal("two leaders")
	}

	ap := &transition.Applier{Store: s, Clock: clock.Real{}}
	specs := make([]job.Spec, 40)
	for i := range specs {
		specs[i] = job.Spec{Kind: "work"}
	}
	e := event.Event{EntityType: "test", EntityID: "t", Type: "test.enqueued"}
	e.SetActor(event.System)
	if err := ap.Apply(ctx, &transition.Transition{Events: []event.Event{e}, Jobs: specs}); err != nil {
		t.Fatal(err)
	}
	count := func(q string, args ...any) int64 {
		rows, err := s.Query(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		_ = rows.Scan(0, &n)
		return n
	}
	apitest.Await(t, "the leader to run 8 jobs", func() bool { return count(`SELECT COUNT(*) FROM executions WHERE finished_at IS NOT NULL`) >= 8 })
	if n := count(`SELECT COUNT(*) FROM executions WHERE instance <> ?`, a.id); n != 0 {
		t.Fatalf("a follower ran %d jobs", n)
	}
	apitest.Await(t, "handlers running", func() bool { return count(`SELECT COUNT(*) FROM executions WHERE finished_at IS NULL`) > 0 })
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = a.cmd.Wait()
	heldAtKill := count(`SELECT COUNT(*) FROM executions WHERE finished_at IS NULL`)
	apitest.Await(t, "the other instance to take over", b.leading)
	// The jobs the dead leader held are done before their lease could run
	// out (the hang guard is shorter): only the takeover can have given
	// them back.
	apitest.Await(t, "all jobs done", func() bool {
		return count(`SELECT COUNT(*) FROM jobs WHERE kind = 'work' AND status = 'done'`) == 40
	})

	rows, err := s.Query(ctx, `SELECT job_id, attempt, instance, started_at, COALESCE(finished_at, 0) FROM executions ORDER BY job_id, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	var prev execution
	reclaimed := 0
	for i := range rows.Len() {
		var e execution
		if err := rows.Scan(i, &e.job, &e.attempt, &e.instance, &e.started, &e.finished); err != nil {
			t.Fatal(err)
		}
		if e.finished == 0 && e.instance != a.id {
			t.Errorf("job %s attempt %d by the survivor never finished", e.job, e.attempt)
		}
		if i > 0 && prev.job == e.job {
			// A second execution: only after the first holder died, taken
			// back by the new leader. (A handler that finished just before
			// the kill, whose job was not yet marked done, runs again: at
			// least once, never concurrently.)
			if e.started < killed.UnixMilli() {
				t.Errorf("job %s ran again %d ms before its first holder was killed", e.job, killed.UnixMilli()-e.started)
			}
			if e.instance != b.id {
				t.Errorf("job %s re-claimed by %s", e.job, e.instance)
			}
			reclaimed++
		}
		prev = e
	}
	if reclaimed == 0 || int64(reclaimed) < heldAtKill {
		t.Errorf("%d jobs re-claimed, %d were held by the killed leader", reclaimed, heldAtKill)
	}
}

// leaderCluster starts a one-node rqlite cluster and migrates it; it
// returns a store on it and its node URLs for the children.
func leaderCluster(t testing.TB) (store.Store, string) {
	t.Helper()
	cluster := rqlitetest.Start(t, 1)
	s, err := rqlite.Open(context.Background(), rqlite.Options{URLs: cluster.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := store.Migrate(context.Background(), s, time.Now()); err != nil {
		t.Fatal(err)
	}
	return s, strings.Join(cluster.URLs(), ",")
}

// BenchmarkTakeover measures how long after the leading Core process is
// killed (SIGKILL) another one leads: at most the leader lease's TTL plus
// a renewal interval, by design.
//
//	go test -run '^$' -bench Takeover -benchtime 5x ./internal/core/
func BenchmarkTakeover(b *testing.B) {
	_, urls := leaderCluster(b)
	leader := spawn(b, urls)
	apitest.Await(b, "the first instance to lead", leader.leading)
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		next := spawn(b, urls)
		apitest.Await(b, "the next instance to campaign", func() bool { return next.campaigns.Load() >= 2 })
		b.StartTimer()
		if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		_ = leader.cmd.Wait()
		apitest.Await(b, "the next instance to take over", next.leading)
		total += time.Since(killed)
		leader = next
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/takeover")
	b.ReportMetric(float64(leaderTTL.Milliseconds()), "ttl-ms")
}

// TestRestartTakesBackClaimedJobsAtOnce: on SQLite, Core is the only process
// with the database open, so the claims it finds at start are a previous
// process's (killed with SIGKILL): it takes them back and runs their jobs at
// once, although their lease runs another hour.
func TestRestartTakesBackClaimedJobsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st := storetest.Open(t, "sqlite")
	a := &transition.Applier{Store: st, Clock: clock.Real{}}
	e := event.Event{EntityType: "test", EntityID: "t", Type: "test.enqueued"}
	e.SetActor(event.System)
	if err := a.Apply(ctx, &transition.Transition{Events: []event.Event{e}, Jobs: []job.Spec{{Kind: "work"}}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.Exec(ctx, store.Stmt(`UPDATE jobs SET status = 'running', attempt = 1, claimed_by = 'previous-process', lease_until = ? WHERE kind = 'work'`,
		now.Add(time.Hour).UnixMilli())); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.Storage.Path, cfg.HTTP.Addr = dir+"/core.db", "127.0.0.1:0"
	cfg.Auth.BootstrapToken = "test-bootstrap-token-0123456789"
	c, err := core.New(core.Options{Config: cfg, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan int, 1)
	c.Jobs.Handle("work", func(_ context.Context, j *job.Job) error { ran <- j.Attempt; return nil })
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- c.Run(runCtx) }()
	defer func() { stop(); apitest.Receive(t, stopped, "Core to stop") }()
	select {
	case attempt := <-ran:
		if attempt != 2 {
			t.Fatalf("the job ran as attempt %d, want 2 (the interrupted attempt counts)", attempt)
		}
	case <-time.After(apitest.HangGuard): // shorter than the hour its lease runs
		t.Fatal("the job claimed by the previous process did not run")
	}
}
