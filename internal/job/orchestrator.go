package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/store"
)

// Handler runs one job. It must be idempotent: after a crash the same job
// runs again. Returning nil marks the job done; an error retries it after a
// backoff (2^failures in a row s), until MaxAttempts failures in a row; an
// error wrapped by Permanent marks it dead at once (see ExpiryLimit for
// the whole rule).
type Handler func(ctx context.Context, j *Job) error

// Config holds the orchestrator's knobs ([jobs] in the configuration).
type Config struct {
	Concurrency   int           // at most this many handlers at once (8)
	Lease         time.Duration // a claim's lease (5m)
	Poll          time.Duration // poll interval for due jobs (1s)
	BackoffCap    time.Duration // longest retry delay (10m)
	ShutdownGrace time.Duration // how long running handlers may finish on shutdown (30s)
}

// DefaultConfig returns data.md's defaults.
func DefaultConfig() Config {
	return Config{Concurrency: 8, Lease: 5 * time.Minute, Poll: time.Second, BackoffCap: 10 * time.Minute, ShutdownGrace: 30 * time.Second}
}

// Orchestrator claims due jobs optimistically and runs their handlers.
// Several orchestrators may share one database: a claim is an optimistic
// update, and finishing is guarded by the claim's attempt number, so a late
// finisher cannot overwrite a job that was re-claimed after its lease ran
// out.
type Orchestrator struct {
	store    store.Store
	clock    clock.Clock
	log      *slog.Logger
	cfg      Config
	owner    string
	metrics  *Metrics
	handlers map[string]Handler

	wake *clock.Waker

	mu      sync.Mutex
	running int
	abandon context.CancelCauseFunc // cancels the handlers of the running Run
	wg      sync.WaitGroup
}

// errAbandoned is the cause of the handlers' context when Abandon cancelled
// it.
var errAbandoned = errors.New("job handlers abandoned: leadership lost")

// NewOrchestrator returns an orchestrator; owner names this instance in
// claims. metrics may be nil.
func NewOrchestrator(s store.Store, c clock.Clock, log *slog.Logger, cfg Config, owner string, metrics *Metrics) *Orchestrator {
	d := DefaultConfig()
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = d.Concurrency
	}
	if cfg.Lease <= 0 {
		cfg.Lease = d.Lease
	}
	if cfg.Poll <= 0 {
		cfg.Poll = d.Poll
	}
	if cfg.BackoffCap <= 0 {
		cfg.BackoffCap = d.BackoffCap
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = d.ShutdownGrace
	}
	return &Orchestrator{
		store: s, clock: c, log: log, cfg: cfg, owner: owner, metrics: metrics,
		handlers: map[string]Handler{},
		wake:     clock.NewWaker(),
	}
}

// Handle registers the handler for a kind. Register before Run.
func (o *Orchestrator) Handle(kind string, h Handler) { o.handlers[kind] = h }

// Notify wakes the orchestrator at once, e.g. after a batch enqueued jobs
// in this process.
func (o *Orchestrator) Notify() { o.wake.Nudge() }

// Running returns how many handlers run now.
func (o *Orchestrator) Running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running
}

// Run claims and runs jobs until ctx is cancelled. Then it stops claiming,
// lets running handlers finish for up to ShutdownGrace, cancels the rest
// (their jobs are claimed again when the lease runs out) and returns.
func (o *Orchestrator) Run(ctx context.Context) {
	handlerCtx, cancelHandlers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHandlers(nil)
	o.mu.Lock()
	o.abandon = cancelHandlers
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.abandon = nil
		o.mu.Unlock()
	}()
	for {
		free := o.cfg.Concurrency - o.Running()
		full := false
		if free > 0 && ctx.Err() == nil {
			n, err := o.claim(ctx, handlerCtx, free)
			if err != nil && ctx.Err() == nil {
				o.log.Error("claim jobs", "err", err)
			}
			full = n == free
		}
		if full {
			continue // there may be more due jobs
		}
		if !o.wake.Wait(ctx, o.clock, o.sleep(ctx)) {
			o.shutdown(cancelHandlers)
			return
		}
	}
}

// minSleep keeps the loop from spinning on a job that another orchestrator
// is claiming at this moment.
const minSleep = 5 * time.Millisecond

// sleep returns how long the loop may sleep: until the next job is due or
// a lease runs out, at most Poll.
func (o *Orchestrator) sleep(ctx context.Context) time.Duration {
	if o.Running() >= o.cfg.Concurrency {
		return o.cfg.Poll
	}
	rows, err := o.store.Query(ctx, `SELECT MIN(t) FROM (
    SELECT MIN(run_at) AS t FROM jobs WHERE status = 'pending'
    UNION ALL
    SELECT MIN(lease_until) AS t FROM jobs WHERE status = 'running')`)
	if err != nil || rows.Len() == 0 || rows.Values[0][0] == nil {
		return o.cfg.Poll
	}
	var next int64
	if err := rows.Scan(0, &next); err != nil {
		return o.cfg.Poll
	}
	d := time.UnixMilli(next).Sub(o.clock.Now())
	return min(max(d, minSleep), o.cfg.Poll)
}

// Wake makes the pending jobs of these dedupe keys due now (a forge's
// webhook: a pull request changed) and wakes the orchestrator; it returns
// how many it woke. It changes nothing but their run time, each with one
// statement guarded by the job's status, so a running or finished job is
// left alone, and it records no event. Jobs due already are not counted.
func (o *Orchestrator) Wake(ctx context.Context, keys ...string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	now := o.clock.Now().UnixMilli()
	batch := make([]store.Statement, 0, 2*len(keys))
	for _, k := range keys {
		batch = append(batch,
			store.Stmt(`UPDATE jobs SET run_at = ?, updated_at = ? WHERE dedupe_key = ? AND status = 'pending' AND run_at > ?`, now, now, k, now),
			// A running job is marked woken (its run_at moves past the one it
			// was claimed with, by 1 ms at least): if its handler snoozes, it runs again at
			// once instead (finish), so a wake that comes while the check it
			// asks for is under way is not lost.
			store.Stmt(`UPDATE jobs SET run_at = MAX(?, run_at + 1), updated_at = ? WHERE dedupe_key = ? AND status = 'running'`, now, now, k))
	}
	res, err := o.store.Exec(ctx, batch...)
	if err != nil {
		return 0, fmt.Errorf("wake jobs: %w", err)
	}
	n := 0
	for _, r := range res {
		n += int(r.RowsAffected)
	}
	if n > 0 {
		o.metrics.woken(n)
		o.Notify()
	}
	return n, nil
}

// Abandon is for a leader that lost its lease: the running handlers are
// cancelled at once, without ShutdownGrace, and what they return is not
// recorded, so that their claims stay as they are for the next leader to
// take back (TakeBack) and run again. Run itself stops when its context
// ends. Without a running Run it does nothing.
func (o *Orchestrator) Abandon() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.abandon != nil {
		o.abandon(errAbandoned)
	}
}

// TakeBack ends, as of now, the lease of every claim of a running job, so
// that Run claims them again at once — along the path of an expired lease:
// the interrupted claim counts as an expiry (not as a failure), and a job
// at its ExpiryLimit becomes dead — instead of when the lease would have
// run out. Call it before Run, and only when no handler can be running for
// any claim: in the one process that has a SQLite database open, at start
// (the claims are a previous process's); in a new leader on rqlite, whose
// predecessors abandoned their handlers before their lease ended, and
// whose own earlier terms' handlers have all returned. It returns how many claims it ended.
func (o *Orchestrator) TakeBack(ctx context.Context) (int, error) {
	now := o.clock.Now().UnixMilli()
	rows, err := o.store.Query(ctx, `SELECT COALESCE(claimed_by, ''), COUNT(*) FROM jobs WHERE status = 'running' AND lease_until > ? GROUP BY claimed_by`, now)
	if err != nil {
		return 0, fmt.Errorf("read claimed jobs: %w", err)
	}
	if rows.Len() == 0 {
		return 0, nil
	}
	holders := make([]string, rows.Len())
	for i := range holders {
		var holder string
		var n int64
		if err := rows.Scan(i, &holder, &n); err != nil {
			return 0, fmt.Errorf("read claimed jobs: %w", err)
		}
		holders[i] = fmt.Sprintf("%s (%d)", holder, n)
	}
	res, err := o.store.Exec(ctx, store.Stmt(`UPDATE jobs SET lease_until = ?, updated_at = ? WHERE status = 'running' AND lease_until > ?`, now, now, now))
	if err != nil {
		return 0, fmt.Errorf("take back claimed jobs: %w", err)
	}
	n := int(res[0].RowsAffected)
	if n > 0 {
		o.log.Warn("took back jobs that an earlier holder had claimed: they run again now", "jobs", n, "claimed_by", strings.Join(holders, ", "))
		o.Notify()
	}
	return n, nil
}

func (o *Orchestrator) shutdown(cancelHandlers context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	grace := o.clock.NewTimer(o.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return
	case <-grace.C():
	}
	o.log.Warn("shutdown grace over: cancelling running job handlers", "running", o.Running())
	cancelHandlers(nil)
	<-done
}

// candidate is a job that looked claimable when read.
type candidate struct {
	job      Job
	status   string
	attempt  int
	expiries int
}

// expired reports whether the candidate is a claim whose lease ran out
// (its holder vanished).
func (c *candidate) expired() bool { return c.status == StatusRunning }

// dead reports whether the candidate is a lost claim one too many in a row
// (ExpiryLimit): it is not claimed again.
func (c *candidate) dead() bool {
	return c.expired() && c.expiries+1 >= ExpiryLimit(c.job.MaxAttempts)
}

// claim claims up to n due jobs and starts their handlers. It returns how
// many it claimed.
func (o *Orchestrator) claim(ctx, handlerCtx context.Context, n int) (int, error) {
	now := o.clock.Now()
	ms := now.UnixMilli()
	// Two LIMITed branches, each walking its index in order, instead of one
	// OR that SQLite answers by sorting every due job (bench/README.md).
	rows, err := o.store.Query(ctx, `SELECT * FROM (
    SELECT id, kind, payload, status, attempt, failures, expiries, max_attempts, COALESCE(dedupe_key, ''), run_at FROM jobs
    WHERE status = 'pending' AND run_at <= ? ORDER BY run_at, id LIMIT ?)
UNION ALL SELECT * FROM (
    SELECT id, kind, payload, status, attempt, failures, expiries, max_attempts, COALESCE(dedupe_key, ''), run_at FROM jobs
    WHERE status = 'running' AND lease_until <= ? ORDER BY run_at, id LIMIT ?)
ORDER BY run_at, id LIMIT ?`, ms, n, ms, n, n)
	if err != nil {
		return 0, fmt.Errorf("read due jobs: %w", err)
	}
	if rows.Len() == 0 {
		return 0, nil
	}
	cands := make([]candidate, rows.Len())
	batch := make([]store.Statement, len(cands))
	leaseUntil := now.Add(o.cfg.Lease).UnixMilli()
	for i := range cands {
		c := &cands[i]
		var payload string
		var runAt int64
		if err := rows.Scan(i, &c.job.ID, &c.job.Kind, &payload, &c.status, &c.attempt, &c.job.Failures, &c.expiries, &c.job.MaxAttempts, &c.job.DedupeKey, &runAt); err != nil {
			return 0, err
		}
		c.job.Payload = []byte(payload)
		c.job.RunAt = time.UnixMilli(runAt).UTC()
		c.job.Attempt = c.attempt + 1
		switch {
		case c.dead():
			// Its holder vanished once too often in a row (the poison
			// pill's bound): it is not claimed again.
			batch[i] = store.Stmt(`UPDATE jobs SET status = 'dead', expiries = ?, last_error = ?, lease_until = NULL, finished_at = ?, updated_at = ?
WHERE id = ? AND status = 'running' AND attempt = ? AND lease_until <= ?`,
				c.expiries+1, fmt.Sprintf("lease expired %d times in a row (the limit for %d attempts), the last during attempt %d",
					c.expiries+1, c.job.MaxAttempts, c.attempt), ms, ms, c.job.ID, c.attempt, ms)
		case c.expired():
			// A lost claim: counted as an expiry, not as a failure, so it
			// adds nothing to the backoff.
			batch[i] = store.Stmt(`UPDATE jobs SET attempt = attempt + 1, expiries = ?, lease_until = ?, claimed_by = ?, updated_at = ?
WHERE id = ? AND status = 'running' AND attempt = ? AND lease_until <= ?`,
				c.expiries+1, leaseUntil, o.owner, ms, c.job.ID, c.attempt, ms)
		default:
			batch[i] = store.Stmt(`UPDATE jobs SET status = 'running', attempt = attempt + 1, lease_until = ?, claimed_by = ?, updated_at = ?
WHERE id = ? AND status = 'pending' AND attempt = ?`,
				leaseUntil, o.owner, ms, c.job.ID, c.attempt)
		}
	}
	res, err := o.store.Exec(ctx, batch...)
	if err != nil {
		// On an unknown outcome the claims may have landed: their leases run
		// out and the jobs are claimed again, so nothing is lost.
		return 0, fmt.Errorf("claim jobs: %w", err)
	}
	claimed := 0
	for i, c := range cands {
		if res[i].RowsAffected != 1 {
			continue // another orchestrator got it first
		}
		if c.dead() {
			o.metrics.count(c.job.Kind, "dead")
			o.log.Warn("job dead: its lease expired too often in a row", "job", c.job.ID, "kind", c.job.Kind, "attempt", c.attempt,
				"expiries", c.expiries+1)
			continue
		}
		claimed++
		o.start(handlerCtx, c.job)
	}
	return claimed, nil
}

func (o *Orchestrator) start(ctx context.Context, j Job) {
	o.mu.Lock()
	o.running++
	o.mu.Unlock()
	o.metrics.setRunning(o.Running())
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.execute(ctx, &j)
		o.mu.Lock()
		o.running--
		o.mu.Unlock()
		o.metrics.setRunning(o.Running())
		o.Notify() // a slot is free
	}()
}

func (o *Orchestrator) execute(ctx context.Context, j *Job) {
	start := o.clock.Now()
	err := o.call(ctx, j)
	// The crash point between a handler's writes and its recorded result:
	// the job runs again (handlers are idempotent).
	fault.Hit("handled:" + j.Kind)
	o.metrics.observe(j.Kind, o.clock.Now().Sub(start))
	if context.Cause(ctx) == errAbandoned {
		o.metrics.count(j.Kind, "abandoned")
		o.log.Warn("job left to the next leader: leadership lost", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "err", err)
		return
	}
	if err := o.finish(context.WithoutCancel(ctx), j, err); err != nil {
		o.log.Error("finish job", "job", j.ID, "kind", j.Kind, "err", err)
	}
}

// call runs the handler, turning a panic into a permanent error.
func (o *Orchestrator) call(ctx context.Context, j *Job) (err error) {
	h, ok := o.handlers[j.Kind]
	if !ok {
		return Permanent(fmt.Errorf("no handler for job kind %q", j.Kind))
	}
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("handler panicked: %v", r))
		}
	}()
	hctx, cancel := context.WithTimeout(ctx, o.cfg.Lease)
	defer cancel()
	return h(hctx, j)
}

// finish records the handler's result, guarded by the claim: if the job was
// re-claimed meanwhile (its lease ran out), nothing is overwritten.
func (o *Orchestrator) finish(ctx context.Context, j *Job, herr error) error {
	now := o.clock.Now()
	ms := now.UnixMilli()
	var st store.Statement
	var result string
	var snooze *snoozeError
	switch {
	case errors.As(herr, &snooze):
		result = "snooze"
		// Woken while it ran (Wake moved run_at past the claimed one): due
		// now, not after the snooze. A snooze is the handler's success:
		// the failures in a row start again from zero (a merge check that
		// waits for weeks meets a forge's outage now and then: each must
		// not cost more backoff than the first, and they must not add up
		// to max_attempts). The attempt, the claims' fencing token, goes on.
		st = store.Stmt(`UPDATE jobs SET status = 'pending', run_at = CASE WHEN run_at > ? THEN ? ELSE ? END, failures = 0, expiries = 0,
lease_until = NULL, updated_at = ? WHERE id = ? AND status = 'running' AND attempt = ?`,
			j.RunAt.UnixMilli(), ms, now.Add(snooze.d).UnixMilli(), ms, j.ID, j.Attempt)
		herr = nil // not a failure
	case herr == nil:
		result = "done"
		st = store.Stmt(`UPDATE jobs SET status = 'done', failures = 0, expiries = 0, lease_until = NULL, finished_at = ?, updated_at = ?
WHERE id = ? AND status = 'running' AND attempt = ?`, ms, ms, j.ID, j.Attempt)
	case IsPermanent(herr) || j.LastTry():
		result = "dead"
		st = store.Stmt(`UPDATE jobs SET status = 'dead', failures = ?, expiries = 0, last_error = ?, lease_until = NULL, finished_at = ?, updated_at = ?
WHERE id = ? AND status = 'running' AND attempt = ?`, j.Failures+1, truncate(herr.Error()), ms, ms, j.ID, j.Attempt)
	default:
		// The failures read with the claim are the row's: no one else
		// writes them while the claim holds (the attempt guards it).
		result = "retry"
		runAt := now.Add(Backoff(j.Failures+1, o.cfg.BackoffCap)).UnixMilli()
		st = store.Stmt(`UPDATE jobs SET status = 'pending', run_at = ?, failures = ?, expiries = 0, last_error = ?, lease_until = NULL, updated_at = ?
WHERE id = ? AND status = 'running' AND attempt = ?`, runAt, j.Failures+1, truncate(herr.Error()), ms, j.ID, j.Attempt)
	}
	res, err := o.store.Exec(ctx, st)
	if err != nil {
		// Also on an unknown outcome: if it did not land, the lease runs out
		// and the job runs again (handlers are idempotent).
		return fmt.Errorf("record %s for job %s: %w", result, j.ID, err)
	}
	if res[0].RowsAffected != 1 {
		o.metrics.count(j.Kind, "lost")
		o.log.Warn("job was re-claimed by someone else: result discarded", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "result", result)
		return nil
	}
	o.metrics.count(j.Kind, result)
	if herr != nil {
		o.log.Warn("job failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "failures", j.Failures+1, "result", result, "err", herr)
	}
	return nil
}

func truncate(s string) string {
	const max = 4000
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
