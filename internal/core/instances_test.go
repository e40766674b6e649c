package core_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/rqlitetest"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/storetest"
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
	c, err := core.Open(ctx, cfg, log)
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

type child struct {
	cmd  *exec.Cmd
	addr string
	id   string
}

func spawn(t *testing.T, urls string) *child {
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
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "READY" {
		t.Fatalf("child did not start: %q %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return &child{cmd: cmd, addr: f[1], id: f[2]}
}

func (c *child) leading(t *testing.T) bool {
	resp, err := http.Get("http://" + c.addr + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct{ Leader bool }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Leader
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type execution struct {
	job, instance     string
	attempt           int
	started, finished int64
}

// TestTwoInstancesOneLeader: two Core processes on one rqlite cluster. Only
// the leader runs jobs; after it is killed with SIGKILL the other takes over
// within the leader lease's TTL and at once takes back the jobs the dead one
// held — long before their 10-minute job lease could run out — and no job
// ever runs twice at the same time.
func TestTwoInstancesOneLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := rqlitetest.Start(t, 1)
	s, err := rqlite.Open(ctx, rqlite.Options{URLs: cluster.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := store.Migrate(ctx, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE executions (job_id TEXT, attempt INTEGER, instance TEXT, started_at INTEGER, finished_at INTEGER)`)); err != nil {
		t.Fatal(err)
	}
	urls := strings.Join(cluster.URLs(), ",")
	a := spawn(t, urls)
	waitFor(t, 10*time.Second, "first instance leads", func() bool { return a.leading(t) })
	b := spawn(t, urls)
	time.Sleep(2 * leaderRenew) // b campaigns at least once
	if b.leading(t) {
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
	waitFor(t, 20*time.Second, "the leader runs jobs", func() bool { return count(`SELECT COUNT(*) FROM executions WHERE finished_at IS NOT NULL`) >= 8 })
	if n := count(`SELECT COUNT(*) FROM executions WHERE instance <> ?`, a.id); n != 0 {
		t.Fatalf("a follower ran %d jobs", n)
	}
	waitFor(t, 10*time.Second, "handlers running", func() bool { return count(`SELECT COUNT(*) FROM executions WHERE finished_at IS NULL`) > 0 })
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = a.cmd.Wait()
	heldAtKill := count(`SELECT COUNT(*) FROM executions WHERE finished_at IS NULL`)
	waitFor(t, 3*leaderTTL, "the other instance takes over", func() bool { return b.leading(t) })
	takeover := time.Since(killed)
	if takeover > leaderTTL+leaderRenew+time.Second {
		t.Errorf("takeover after %v; TTL is %v", takeover, leaderTTL)
	}
	// The jobs the dead leader held are done long before their lease could
	// run out: only the takeover can have given them back.
	waitFor(t, 60*time.Second, "all jobs done", func() bool {
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
	t.Logf("takeover after %v (TTL %v); %d jobs held by the killed leader taken back at once", takeover.Round(time.Millisecond), leaderTTL, reclaimed)
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
	c, err := core.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), st)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan int, 1)
	c.Jobs.Handle("work", func(_ context.Context, j *job.Job) error { ran <- j.Attempt; return nil })
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- c.Run(runCtx) }()
	defer func() { stop(); <-stopped }()
	select {
	case attempt := <-ran:
		if attempt != 2 {
			t.Fatalf("the job ran as attempt %d, want 2 (the interrupted attempt counts)", attempt)
		}
	case <-time.After(30 * time.Second): // a guard: its lease runs another hour
		t.Fatal("the job claimed by the previous process did not run")
	}
}
