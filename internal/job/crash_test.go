package job_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// The crash child: an orchestrator in its own process, killed by the test.
const (
	envChild       = "BALLET_CRASH_CHILD_ENGINE"
	envAddr        = "BALLET_CRASH_CHILD_ADDR"
	envConcurrency = "BALLET_CRASH_CHILD_CONCURRENCY"
)

func TestMain(m *testing.M) {
	if engine := os.Getenv(envChild); engine != "" {
		concurrency, _ := strconv.Atoi(os.Getenv(envConcurrency))
		os.Exit(crashChild(engine, os.Getenv(envAddr), concurrency))
	}
	os.Exit(m.Run())
}

// crashChild runs an orchestrator with short leases until it is killed.
func crashChild(engine, addr string, concurrency int) int {
	ctx := context.Background()
	s, err := storetest.OpenAddress(ctx, engine, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	o := job.NewOrchestrator(s, clock.Real{}, log, job.Config{
		Concurrency: concurrency, Lease: time.Second, Poll: 20 * time.Millisecond, BackoffCap: 50 * time.Millisecond,
	}, "child-"+strconv.Itoa(os.Getpid()), nil)
	record := func(ctx context.Context, j *job.Job) error {
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		_, err := s.Exec(ctx, store.Stmt(`INSERT INTO executions (job_id, attempt) VALUES (?, ?)`, j.ID, j.Attempt))
		return err
	}
	o.Handle("ok", record)
	o.Handle("flaky", func(ctx context.Context, j *job.Job) error {
		if j.Attempt < 3 {
			return fmt.Errorf("flaky attempt %d", j.Attempt)
		}
		return record(ctx, j)
	})
	o.Handle("perm", func(context.Context, *job.Job) error { return job.Permanent(errors.New("never")) })
	o.Handle("hopeless", func(_ context.Context, j *job.Job) error {
		time.Sleep(10 * time.Millisecond)
		return fmt.Errorf("hopeless attempt %d", j.Attempt)
	})
	o.Run(ctx) // until SIGKILL
	return 0
}

// TestCrashLosesNoJob kills an orchestrator process with SIGKILL while its
// handlers run, several times, then lets a last one finish: every job ends
// done or dead exactly as the rules say. The first process kills itself at
// a fault point right after an "ok" handler wrote and before its result was
// recorded: that job must run again, and the re-execution must be
// harmless (a new attempt, the job done once, on the new attempt's result).
func TestCrashLosesNoJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE executions (job_id TEXT NOT NULL, attempt INTEGER NOT NULL)`)); err != nil {
			t.Fatal(err)
		}
		a := &transition.Applier{Store: s, Clock: clock.Real{}}
		want := map[string]int{"ok": 60, "flaky": 20, "perm": 20, "hopeless": 20}
		for kind, n := range want {
			specs := make([]job.Spec, n)
			for i := range specs {
				specs[i] = job.Spec{Kind: kind, MaxAttempts: 3}
				if kind == "ok" || kind == "flaky" {
					specs[i].MaxAttempts = 20
				}
			}
			e := event.Event{EntityType: "test", EntityID: kind, Type: "test.enqueued"}
			e.SetActor(event.System)
			if err := a.Apply(ctx, &transition.Transition{Events: []event.Event{e}, Jobs: specs}); err != nil {
				t.Fatal(err)
			}
		}
		engine, addr := storetest.Address(t, s)
		q := func(sql string, args ...any) int64 {
			t.Helper()
			rows, err := s.Query(ctx, sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			if err := rows.Scan(0, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		spawn := func(concurrency int, faultSpec string) (*exec.Cmd, <-chan error) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envChild+"="+engine, envAddr+"="+addr,
				envConcurrency+"="+strconv.Itoa(concurrency), fault.EnvVar+"="+faultSpec)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			return cmd, exited
		}
		kill := func(cmd *exec.Cmd, exited <-chan error) {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			hang.Recv(t, exited, "the killed child exited")
		}

		// The window "handler wrote, result not recorded": the child kills
		// itself after the 5th "ok" handler returned. It runs one handler at
		// a time, so that no other write of it is in flight when it dies
		// (rqlite would still commit one).
		_, exited := spawn(1, "handled:ok:5")
		if err := hang.Recv(t, exited, "the child to hit its fault point"); err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("the child armed with a fault point ended with %v, want killed", err)
		}
		windowRows, err := s.Query(ctx, `SELECT id, attempt FROM jobs j WHERE kind = 'ok' AND status = 'running'
    AND EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.id AND e.attempt = j.attempt)`)
		if err != nil {
			t.Fatal(err)
		}
		window := map[string]int64{} // job → the attempt whose result was not recorded
		for i := range windowRows.Len() {
			var id string
			var attempt int64
			if err := windowRows.Scan(i, &id, &attempt); err != nil {
				t.Fatal(err)
			}
			window[id] = attempt
		}
		if len(window) != 1 {
			t.Fatalf("the fault point left %d jobs whose handler had written and whose result was not recorded, want 1", len(window))
		}

		kills, runningAtKill := 0, int64(0)
		for range 4 {
			cmd, exited := spawn(8, "")
			before := q(`SELECT COUNT(*) FROM executions`)
			hang.WaitFor(t, "progress", func() bool {
				return q(`SELECT COUNT(*) FROM executions`) > before+3 && q(`SELECT COUNT(*) FROM jobs WHERE status = 'running'`) > 0
			})
			// Kill at a random moment of the load (not a synchronisation).
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			kill(cmd, exited)
			kills++
			runningAtKill += q(`SELECT COUNT(*) FROM jobs WHERE status = 'running'`)
		}
		cmd, exited := spawn(8, "")
		defer kill(cmd, exited)
		hang.WaitFor(t, "every job done or dead after the last restart", func() bool {
			return q(`SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')`) == 0
		})
		if runningAtKill == 0 {
			t.Fatal("no kill hit a running handler: the test proved nothing")
		}
		for kind, n := range want {
			status := job.StatusDone
			if kind == "perm" || kind == "hopeless" {
				status = job.StatusDead
			}
			if got := q(`SELECT COUNT(*) FROM jobs WHERE kind = ? AND status = ?`, kind, status); got != int64(n) {
				t.Errorf("%s: %d of %d jobs %s", kind, got, n, status)
			}
		}
		// A hopeless job dies of its third failure in a row; the claims the
		// kills cut cost it more attempts, but no failure (4 kills are
		// fewer than the 6 expiries in a row that would kill it).
		if n := q(`SELECT COUNT(*) FROM jobs WHERE kind = 'hopeless' AND (failures <> 3 OR attempt < 3 OR last_error NOT LIKE 'hopeless attempt %')`); n != 0 {
			t.Errorf("%d hopeless jobs died of other than 3 failures in a row", n)
		}
		if n := q(`SELECT COUNT(*) FROM jobs WHERE kind = 'hopeless' AND attempt > 3`); n > 0 {
			t.Logf("%d hopeless jobs lost claims to the kills and still died of 3 failures", n)
		}
		if n := q(`SELECT COUNT(*) FROM jobs WHERE kind = 'perm' AND last_error <> 'permanent: never'`); n != 0 {
			t.Errorf("%d permanent failures lost their last error", n)
		}
		if n := q(`SELECT COUNT(*) FROM jobs j WHERE status = 'done' AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.id)`); n != 0 {
			t.Errorf("%d jobs done without their handler completing", n)
		}
		if n := q(`SELECT COUNT(*) FROM jobs WHERE kind = 'flaky' AND attempt < 3`); n != 0 {
			t.Errorf("%d flaky jobs done before their third attempt", n)
		}
		// Harmless re-executions: each attempt ran at most once, and a done
		// job holds the result of its last execution.
		if n := q(`SELECT COUNT(*) FROM (SELECT job_id, attempt FROM executions GROUP BY job_id, attempt HAVING COUNT(*) > 1)`); n != 0 {
			t.Errorf("%d attempts executed twice", n)
		}
		if n := q(`SELECT COUNT(*) FROM jobs j WHERE status = 'done' AND attempt <> (SELECT MAX(attempt) FROM executions e WHERE e.job_id = j.id)`); n != 0 {
			t.Errorf("%d done jobs whose recorded attempt is not their last execution", n)
		}
		for id, attempt := range window {
			if n := q(`SELECT COUNT(*) FROM executions WHERE job_id = ? AND attempt > ?`, id, attempt); n == 0 {
				t.Errorf("job %s: attempt %d wrote, its result was never recorded, and it did not run again", id, attempt)
			}
			if n := q(`SELECT COUNT(*) FROM jobs WHERE id = ? AND status = 'done' AND attempt > ?`, id, attempt); n != 1 {
				t.Errorf("job %s is not done on a later attempt than %d", id, attempt)
			}
		}
		reexecuted := q(`SELECT COUNT(*) - COUNT(DISTINCT job_id) FROM executions`)
		t.Logf("crash: %d jobs; a fault point left a job whose handler wrote and whose result was not recorded; %d random kills left %d claims open; %d re-executions",
			120, kills, runningAtKill, reexecuted)
	})
}
