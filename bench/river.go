package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the same driver Ballet uses, registered as "sqlite"
)

// noopArgs is River's no-op job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

// sqliteDSN returns the DSN with the same settings Ballet's SQLite store
// uses for its writer connection.
func sqliteDSN(path string, readOnly bool) string {
	v := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"} {
		v.Add("_pragma", p)
	}
	if readOnly {
		v.Add("_pragma", "query_only(1)")
	} else {
		v.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + v.Encode()
}

// riverDB is a fresh, migrated River database.
type riverDB struct {
	pool *sql.DB // River's pool
	read *sql.DB // a separate reader for the benchmark's own polling
}

func (d *riverDB) Close() {
	d.read.Close()
	d.pool.Close()
}

func (b *bench) openRiver(ctx context.Context, name string) (*riverDB, error) {
	dir, err := b.tempDir(name)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "river.db")
	pool, err := sql.Open("sqlite", sqliteDSN(path, false))
	if err != nil {
		return nil, err
	}
	pool.SetMaxOpenConns(b.o.riverConns)
	pool.SetMaxIdleConns(b.o.riverConns)
	pool.SetConnMaxIdleTime(0)
	pool.SetConnMaxLifetime(0)
	if _, err := pool.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
		pool.Close()
		return nil, err
	}
	m, err := rivermigrate.New(riversqlite.New(pool), &rivermigrate.Config{Logger: b.log})
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	read, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &riverDB{pool: pool, read: read}, nil
}

// riverClient builds a client. With work nil it only inserts; otherwise it
// runs one queue of b.o.slots workers calling work.
func (b *bench) riverClient(db *riverDB, work func(context.Context, *river.Job[noopArgs]) error, cooldown time.Duration) (*river.Client[*sql.Tx], error) {
	workers := river.NewWorkers()
	if work == nil {
		work = func(context.Context, *river.Job[noopArgs]) error { return nil }
	}
	river.AddWorker(workers, river.WorkFunc(work))
	cfg := &river.Config{Logger: b.log, Workers: workers}
	if cooldown > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: b.o.slots}}
		cfg.FetchCooldown = cooldown
		// FetchPollInterval stays at River's default, 1 s (Ballet polls every
		// second too); it only has to be ≥ FetchCooldown.
	}
	return river.NewClient(riversqlite.New(db.pool), cfg)
}

func (b *bench) riverInserts(ctx context.Context) error {
	for _, writers := range b.writerCounts() {
		db, err := b.openRiver(ctx, fmt.Sprintf("river-insert-%d", writers))
		if err != nil {
			return err
		}
		c, err := b.riverClient(db, nil, 0)
		if err != nil {
			db.Close()
			return err
		}
		ops, el, err := runWriters(ctx, writers, b.o.warmup, b.o.duration, func(ctx context.Context, _ int) error {
			_, err := c.Insert(ctx, noopArgs{}, nil)
			return err
		})
		db.Close()
		if err != nil {
			return err
		}
		b.rep.add(Result{ID: fmt.Sprintf("tx/river-sqlite/%d", writers), System: "River SQLite",
			What: fmt.Sprintf("client.Insert, %d writer(s)", writers), Ops: ops, Seconds: el.Seconds()})
	}
	return nil
}

// riverJobs drains n pre-inserted no-op jobs with MaxWorkers = slots.
func (b *bench) riverJobsOnce(ctx context.Context, n int, cooldown time.Duration, name string) (time.Duration, error) {
	db, err := b.openRiver(ctx, name)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var ran atomic.Int64
	allRan := make(chan struct{})
	c, err := b.riverClient(db, func(context.Context, *river.Job[noopArgs]) error {
		if ran.Add(1) == int64(n) {
			close(allRan)
		}
		return nil
	}, cooldown)
	if err != nil {
		return 0, err
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for done := 0; done < n; {
		params = params[:0]
		for range min(1000, n-done) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := c.InsertMany(ctx, params); err != nil {
			return 0, fmt.Errorf("insert jobs: %w", err)
		}
		done += len(params)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	if err := c.Start(runCtx); err != nil {
		return 0, err
	}
	b.lastStart = time.Since(start)
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
	}()
	timeout := time.NewTimer(max(60*time.Second, time.Duration(n)*50*time.Millisecond))
	defer timeout.Stop()
	select {
	case <-allRan:
	case <-timeout.C:
		return 0, fmt.Errorf("timed out: %d of %d jobs ran", ran.Load(), n)
	}
	for {
		var done int
		if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE state = 'completed'`).Scan(&done); err != nil {
			return 0, err
		}
		if done >= n {
			break
		}
		select {
		case <-timeout.C:
			return 0, fmt.Errorf("timed out: %d of %d jobs completed", done, n)
		case <-time.After(time.Millisecond):
		}
	}
	el := time.Since(start)
	if r := ran.Load(); r != int64(n) {
		return 0, fmt.Errorf("%d worker runs for %d jobs", r, n)
	}
	return el, nil
}

func (b *bench) riverJobs(ctx context.Context) error {
	for _, v := range []struct {
		id, label string
		n         int
		cooldown  time.Duration
	}{
		{"jobs/river-default", "FetchCooldown 100 ms (default)", b.o.jobsRiverDef, river.FetchCooldownDefault},
		{"jobs/river-1ms", "FetchCooldown 1 ms", b.o.jobs, time.Millisecond},
	} {
		el, err := b.riverJobsOnce(ctx, v.n, v.cooldown, "river-"+v.id[len("jobs/"):])
		if err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		b.rep.add(Result{ID: v.id, System: "River SQLite", What: fmt.Sprintf("no-op jobs, %d workers, %s", b.o.slots, v.label),
			Ops: v.n, Seconds: el.Seconds(), Note: fmt.Sprintf("timed from client.Start (which returned after %.1f ms) to the last completion in the database", float64(b.lastStart.Microseconds())/1000)})
	}
	return nil
}

// riverLatency measures from just before client.Insert to the worker's
// first line, one job at a time on an idle queue.
func (b *bench) riverLatencyOnce(ctx context.Context, cooldown time.Duration, name string) ([]time.Duration, error) {
	db, err := b.openRiver(ctx, name)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	started := make(chan time.Time, 1)
	c, err := b.riverClient(db, func(context.Context, *river.Job[noopArgs]) error {
		started <- time.Now()
		return nil
	}, cooldown)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := c.Start(runCtx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
	}()
	// Wait until the client is fully up (leader elected, listener polling).
	time.Sleep(500 * time.Millisecond)
	// Pause long enough for River's insert-notification limiter (one
	// notification per queue per FetchCooldown) to reset, so every sample
	// meets an idle queue.
	pause := max(b.o.pause, cooldown+10*time.Millisecond)
	const warm = 10
	out := make([]time.Duration, 0, b.o.samples)
	for i := range b.o.samples + warm {
		t0 := time.Now()
		if _, err := c.Insert(ctx, noopArgs{}, nil); err != nil {
			return nil, err
		}
		var t1 time.Time
		select {
		case t1 = <-started:
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("sample %d: job did not start within 10 s", i)
		}
		if i >= warm {
			out = append(out, t1.Sub(t0))
		}
		b.idle(pause)
	}
	return out, nil
}

func (b *bench) riverLatency(ctx context.Context) error {
	for _, v := range []struct {
		id, label string
		cooldown  time.Duration
	}{
		{"lat/river-default", "cooldown 100 ms (default)", river.FetchCooldownDefault},
		{"lat/river-1ms", "cooldown 1 ms", time.Millisecond},
	} {
		s, err := b.riverLatencyOnce(ctx, v.cooldown, "river-"+v.id[len("lat/"):])
		if err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		r := latencyResult(v.id, "River SQLite", "enqueue-to-start latency, "+v.label, s)
		r.Note = fmt.Sprintf("pause between samples %s + U[0, %s)", max(b.o.pause, v.cooldown+10*time.Millisecond), b.o.jitter)
		b.rep.add(r)
	}
	return nil
}
