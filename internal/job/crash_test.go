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
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// The crash child: an orchestrator in its own process, killed by the test.
const (
	envChild  = "BALLET_CRASH_CHILD_ENGINE"
	envAddr   = "BALLET_CRASH_CHILD_ADDR"
	crashJobs = "ok:60,flaky:20,perm:20,hopeless:20"
)

func TestMain(m *testing.M) {
	if engine := os.Getenv(envChild); engine != "" {
		os.Exit(crashChild(engine, os.Getenv(envAddr)))
	}
	os.Exit(m.Run())
}

// crashChild runs an orchestrator with short leases until it is killed.
func crashChild(engine, addr string) int {
	ctx := context.Background()
	s, err := storetest.OpenAddress(ctx, engine, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	o := job.NewOrchestrator(s, clock.Real{}, log, job.Config{
		Concurrency: 8, Lease: time.Second, Poll: 20 * time.Millisecond, BackoffCap: 50 * time.Millisecond,
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
	_ = o.Run(ctx) // until SIGKILL
	return 0
}

// TestCrashLosesNoJob kills an orchestrator process with SIGKILL while its
// handlers run, several times, then lets a last one finish: every job ends
// done or dead exactly as the rules say.
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
			rows, err := s.Query(ctx, sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			_ = rows.Scan(0, &n)
			return n
		}
		spawn := func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envChild+"="+engine, envAddr+"="+addr)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			return cmd
		}
		kills, runningAtKill := 0, int64(0)
		for range 4 {
			cmd := spawn()
			before := q(`SELECT COUNT(*) FROM executions`)
			waitFor(t, "progress", func() bool {
				return q(`SELECT COUNT(*) FROM executions`) > before+3 && q(`SELECT COUNT(*) FROM jobs WHERE status = 'running'`) > 0
			})
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			kills++
			runningAtKill += q(`SELECT COUNT(*) FROM jobs WHERE status = 'running'`)
		}
		cmd := spawn()
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		for q(`SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')`) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("jobs still open after the last restart: %d", q(`SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')`))
			}
			time.Sleep(20 * time.Millisecond)
		}
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
		if n := q(`SELECT COUNT(*) FROM jobs WHERE kind = 'hopeless' AND attempt <> 3`); n != 0 {
			t.Errorf("%d hopeless jobs died after other than 3 attempts", n)
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
		t.Logf("crash: %d jobs, %d kills, %d handlers running at the kills, %d re-executions after a kill",
			120, kills, runningAtKill, q(`SELECT COUNT(*) - COUNT(DISTINCT job_id) FROM executions`))
	})
}
