package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/sqlite"
	"github.com/ballet/ballet/internal/transition"
)

// noopKind is the job kind every Ballet measurement enqueues.
const noopKind = "bench.noop"

// openBalletSQLite opens a fresh, migrated Ballet SQLite store with the
// benchmark's entity table.
func (b *bench) openBalletSQLite(ctx context.Context, name string) (store.Store, error) {
	dir, err := b.tempDir(name)
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "core.db"))
	if err != nil {
		return nil, err
	}
	if err := prepareBallet(ctx, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// prepareBallet migrates st and creates the entity table the transitions
// update.
func prepareBallet(ctx context.Context, st store.Store) error {
	if err := store.Migrate(ctx, st, time.Now()); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	_, err := st.Exec(ctx, store.Stmt(`CREATE TABLE bench_entities (
    id      TEXT    PRIMARY KEY,
    state   TEXT    NOT NULL,
    version INTEGER NOT NULL
)`))
	return err
}

// entity is one writer's row; only that writer touches it, so it never loses
// a race and needs no read before each write.
type entity struct {
	id      string
	version int64
}

func newEntities(ctx context.Context, st store.Store, prefix string, n int) ([]*entity, error) {
	out := make([]*entity, n)
	batch := make([]store.Statement, n)
	for i := range out {
		out[i] = &entity{id: fmt.Sprintf("%s-%d", prefix, i)}
		batch[i] = store.Stmt(`INSERT INTO bench_entities (id, state, version) VALUES (?, 'new', 0)`, out[i].id)
	}
	_, err := st.Exec(ctx, batch...)
	return out, err
}

// move applies the benchmark's transition to e: the guarded optimistic
// update of its row, the guard, one event and one job.
func move(ctx context.Context, a *transition.Applier, e *entity) error {
	ev := event.Event{EntityType: "bench", EntityID: e.id, Type: "bench.moved"}
	ev.SetActor(event.System)
	state := "s" + fmt.Sprint(e.version+1)
	t := &transition.Transition{
		Events: []event.Event{ev},
		Guarded: []store.Statement{store.Stmt(`UPDATE bench_entities SET state = ?, version = version + 1 WHERE id = ? AND version = ?`,
			state, e.id, e.version)},
		Jobs: []job.Spec{{Kind: noopKind}},
	}
	if err := a.Apply(ctx, t); err != nil {
		return err
	}
	e.version++
	return nil
}

// runWriters runs op on each of n writers (op gets the writer's index):
// warmup untimed operations each, then as many as fit in d. It returns the
// timed operations and the timed span.
func runWriters(ctx context.Context, n, warmup int, d time.Duration, op func(ctx context.Context, w int) error) (int, time.Duration, error) {
	var (
		total    atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
		stop     atomic.Bool
	)
	// Warm up (prepared statements, connections, caches) on every writer
	// at once, untimed.
	for w := range n {
		wg.Go(func() {
			for range warmup {
				if err := op(ctx, w); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("warm-up: %w", err) })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	start := time.Now()
	deadline := start.Add(d)
	for w := range n {
		wg.Go(func() {
			for !stop.Load() {
				if err := op(ctx, w); err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				total.Add(1)
				if time.Now().After(deadline) {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return int(total.Load()), time.Since(start), firstErr
}

// balletTransitions measures transition batches per second on st with the
// given number of writers.
func (b *bench) balletTransitions(ctx context.Context, st store.Store, writers, warmup int) (int, time.Duration, error) {
	ents, err := newEntities(ctx, st, fmt.Sprintf("w%d", writers), writers)
	if err != nil {
		return 0, 0, err
	}
	a := &transition.Applier{Store: st, Clock: clock.Real{}}
	return runWriters(ctx, writers, warmup, b.o.duration, func(ctx context.Context, w int) error {
		return move(ctx, a, ents[w])
	})
}

func (b *bench) balletSQLiteTransitions(ctx context.Context) error {
	for _, writers := range b.writerCounts() {
		st, err := b.openBalletSQLite(ctx, fmt.Sprintf("ballet-tx-%d", writers))
		if err != nil {
			return err
		}
		ops, el, err := b.balletTransitions(ctx, st, writers, b.o.warmup)
		st.Close()
		if err != nil {
			return err
		}
		b.rep.add(Result{ID: fmt.Sprintf("tx/ballet-sqlite/%d", writers), System: "Ballet SQLite",
			What: fmt.Sprintf("transition batches, %d writer(s)", writers), Ops: ops, Seconds: el.Seconds()})
	}
	return nil
}

func (b *bench) writerCounts() []int {
	if b.o.writers == 1 {
		return []int{1}
	}
	return []int{1, b.o.writers}
}

// insertNoopJobs enqueues n due no-op jobs in large batches.
func insertNoopJobs(ctx context.Context, st store.Store, n, chunk int) error {
	now := time.Now().Add(-time.Second) // due at once
	for done := 0; done < n; {
		k := min(chunk, n-done)
		batch := make([]store.Statement, k)
		for i := range batch {
			s, err := job.Spec{Kind: noopKind}.Insert(transition.NewID(), now)
			if err != nil {
				return err
			}
			batch[i] = s
		}
		if _, err := st.Exec(ctx, batch...); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		done += k
	}
	return nil
}

// balletJobs drains n pre-inserted no-op jobs with an orchestrator of the
// configured slots (Poll 1 s, real clock) and returns the time from Run to
// the moment the database shows every job done.
func (b *bench) balletJobs(ctx context.Context, st store.Store, n, chunk int) (time.Duration, error) {
	if err := insertNoopJobs(ctx, st, n, chunk); err != nil {
		return 0, err
	}
	o := job.NewOrchestrator(st, clock.Real{}, b.log, job.Config{Concurrency: b.o.slots, Poll: time.Second}, "bench", nil)
	var ran atomic.Int64
	allRan := make(chan struct{})
	o.Handle(noopKind, func(context.Context, *job.Job) error {
		if ran.Add(1) == int64(n) {
			close(allRan)
		}
		return nil
	})
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	start := time.Now()
	go func() { o.Run(runCtx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	timeout := time.NewTimer(max(60*time.Second, time.Duration(n)*20*time.Millisecond))
	defer timeout.Stop()
	select {
	case <-allRan:
	case <-timeout.C:
		return 0, fmt.Errorf("timed out: %d of %d jobs ran", ran.Load(), n)
	}
	// Every handler ran; wait until every result is committed.
	for {
		done, err := countJobs(ctx, st, job.StatusDone)
		if err != nil {
			return 0, err
		}
		if done >= n {
			break
		}
		select {
		case <-timeout.C:
			return 0, fmt.Errorf("timed out: %d of %d jobs done", done, n)
		case <-time.After(time.Millisecond):
		}
	}
	el := time.Since(start)
	if dead, err := countJobs(ctx, st, job.StatusDead); err != nil || dead > 0 {
		return 0, errors.Join(err, fmt.Errorf("%d jobs dead", dead))
	}
	if r := ran.Load(); r != int64(n) {
		return 0, fmt.Errorf("%d handler runs for %d jobs", r, n)
	}
	return el, nil
}

func countJobs(ctx context.Context, st store.Store, status string) (int, error) {
	rows, err := st.Query(ctx, `SELECT COUNT(*) FROM jobs WHERE status = ?`, status)
	if err != nil {
		return 0, err
	}
	var n int
	err = rows.Scan(0, &n)
	return n, err
}

func (b *bench) balletSQLiteJobs(ctx context.Context) error {
	st, err := b.openBalletSQLite(ctx, "ballet-jobs")
	if err != nil {
		return err
	}
	defer st.Close()
	el, err := b.balletJobs(ctx, st, b.o.jobs, 1000)
	if err != nil {
		return err
	}
	b.rep.add(Result{ID: "jobs/ballet-sqlite", System: "Ballet SQLite", What: fmt.Sprintf("no-op jobs, %d slots", b.o.slots),
		Ops: b.o.jobs, Seconds: el.Seconds(), Note: "timed from Orchestrator.Run to the last done job in the database"})
	return nil
}

// balletLatency enqueues one job at a time through an Applier whose
// subscriber wakes the orchestrator (as core wires it) and measures the time
// from just before Apply to the handler's first line.
func (b *bench) balletLatency(ctx context.Context, st store.Store, samples int) ([]time.Duration, error) {
	o := job.NewOrchestrator(st, clock.Real{}, b.log, job.Config{Concurrency: b.o.slots, Poll: time.Second}, "bench", nil)
	started := make(chan time.Time, 1)
	o.Handle(noopKind, func(context.Context, *job.Job) error {
		started <- time.Now()
		return nil
	})
	a := &transition.Applier{Store: st, Clock: clock.Real{}}
	a.Subscribe(transition.WakeOnJobs(o.Notify))
	ents, err := newEntities(ctx, st, "lat", 1)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { o.Run(runCtx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(50 * time.Millisecond) // let the loop reach its idle wait
	const warm = 10
	out := make([]time.Duration, 0, samples)
	for i := range samples + warm {
		t0 := time.Now()
		if err := move(ctx, a, ents[0]); err != nil {
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
		// Let the job finish and the loop go idle again.
		for o.Running() > 0 {
			time.Sleep(200 * time.Microsecond)
		}
		b.idle(b.o.pause)
	}
	return out, nil
}

func (b *bench) balletSQLiteLatency(ctx context.Context) error {
	st, err := b.openBalletSQLite(ctx, "ballet-latency")
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := b.balletLatency(ctx, st, b.o.samples)
	if err != nil {
		return err
	}
	b.rep.add(latencyResult("lat/ballet-sqlite", "Ballet SQLite", "enqueue-to-start latency", s))
	return nil
}
