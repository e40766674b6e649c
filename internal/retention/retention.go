// Package retention keeps Core's data bounded ([retention],
// docs/operations.md#retention). The leader queues one durable job,
// retention.sweep, at start and every [retention] interval; the job
// deletes what is older than its kind's retention — run logs, finished
// jobs, expired or ended browser sessions, read notifications, ended
// webhook deliveries and digests, runners gone for good — online, in small batches. Each batch is one atomic write of
// ids read just before (ADR-0016), whose statements re-check why each row
// may go, so a row that changed meanwhile stays; writers never wait for
// more than one batch. Each kind's owner builds its deletes (run, job,
// auth, notify, webhook, digest); this package only decides when. Events are history and
// are never deleted.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
	"github.com/ballet/ballet/internal/webhook"
)

// Kinds of data retention deletes, the values of the kind label of
// ballet_retention_deleted_total.
const (
	KindRunLogs       = "run_logs"           // log chunks of runs that ended before [retention] run_logs
	KindJobs          = "jobs"               // jobs done or dead before [retention] jobs
	KindSessions      = "sessions"           // browser sessions expired or ended before [retention] sessions
	KindNotifications = "notifications"      // notifications read before [retention] notifications
	KindWebhooks      = "webhook_deliveries" // webhook deliveries that ended before [retention] deliveries
	KindDigests       = "digests"            // digests written before [retention] deliveries (each person's latest stays)
	KindRunners       = "runners"            // runners not seen for [retention] runners (event runner.removed)
)

// Kinds lists every kind, in the order a sweep deletes them.
var Kinds = []string{KindRunLogs, KindJobs, KindSessions, KindNotifications, KindWebhooks, KindDigests, KindRunners}

// Defaults.
const (
	DefaultInterval = time.Hour
	// DefaultBatch is how many rows one batch deletes at most (for run
	// logs: chunks of one run; DefaultLogRuns runs are read at once).
	DefaultBatch = 500
	// DefaultLogRuns is how many runs' logs one read finds.
	DefaultLogRuns = 50
	// DefaultMaxBatches bounds the batches of one kind in one run of the
	// job; with more to do, the job runs again a second later (snoozed),
	// well within its lease.
	DefaultMaxBatches = 200
)

// SweepArgs is the job retention.sweep: one sweep of every kind. At most
// one is queued or running (its dedupe key).
type SweepArgs struct{}

// Kind implements job.Args.
func (SweepArgs) Kind() string { return "retention.sweep" }

// DedupeKey implements job.Deduped.
func (SweepArgs) DedupeKey() string { return "retention.sweep" }

// Config is [retention]: how long each kind is kept (0: kept for good)
// and how often the sweep runs.
type Config struct {
	RunLogs, Jobs, Sessions, Notifications, Deliveries, Runners time.Duration
	Interval                                                    time.Duration // DefaultInterval when ≤ 0
	Batch                                                       int           // DefaultBatch when ≤ 0
	MaxBatches                                                  int           // DefaultMaxBatches when ≤ 0
	// Metrics counts the rows deleted; nil counts nothing.
	Metrics *Metrics
	// WakeJobs is called after the sweep's job was queued (the
	// orchestrator's Notify); nil: it runs at the orchestrator's next poll.
	WakeJobs func()
}

// Retention queues and runs the sweeps.
type Retention struct {
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	runs  *run.Service
	cfg   Config
}

// New returns the retention of s's data. log may be nil.
func New(s store.Store, c clock.Clock, log *slog.Logger, runs *run.Service, cfg Config) *Retention {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxBatches <= 0 {
		cfg.MaxBatches = DefaultMaxBatches
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Retention{store: s, clock: c, log: log, runs: runs, cfg: cfg}
}

// Register installs the sweep's job handler: a sweep that stopped at its
// bound of batches runs again a second later.
func (r *Retention) Register(reg job.Registry) {
	job.Register(reg, func(ctx context.Context, _ *job.Job, _ SweepArgs) error {
		_, more, err := r.Sweep(ctx)
		if err != nil {
			return err
		}
		if more {
			return job.Snooze(time.Second)
		}
		return nil
	})
}

// Run queues a sweep at once, then every Interval, until ctx ends (the
// leader runs it). A sweep still queued or running makes queueing a no-op.
func (r *Retention) Run(ctx context.Context) {
	wake := clock.NewWaker()
	for {
		if err := r.Queue(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("queue the retention sweep (queued again at the next interval)", "err", err)
		}
		if !wake.Wait(ctx, r.clock, r.cfg.Interval) {
			return
		}
	}
}

// Queue queues the sweep's job (a no-op while one is queued or running).
func (r *Retention) Queue(ctx context.Context) error {
	st, err := job.New(SweepArgs{}).Insert(transition.NewID(), r.clock.Now())
	if err != nil {
		return err
	}
	if _, err := r.store.Exec(ctx, st); err != nil {
		return fmt.Errorf("queue the retention sweep: %w", err)
	}
	if r.cfg.WakeJobs != nil {
		r.cfg.WakeJobs()
	}
	return nil
}

// Report counts the rows a sweep deleted, by kind (run logs: chunks).
type Report map[string]int

// Sweep deletes, kind by kind, what is older than its retention, in
// batches of at most Batch rows and MaxBatches batches per kind. more
// tells that a kind stopped at its bound with rows left.
func (r *Retention) Sweep(ctx context.Context) (rep Report, more bool, err error) {
	rep = Report{}
	now := r.clock.Now()
	type deleter func(ctx context.Context, cutoff time.Time) (read, deleted int, full int, err error)
	kinds := []struct {
		kind string
		keep time.Duration
		del  deleter
	}{
		{KindRunLogs, r.cfg.RunLogs, func(ctx context.Context, c time.Time) (int, int, int, error) {
			runs := max(1, min(DefaultLogRuns, r.cfg.Batch))
			read, n, err := r.runs.DeleteOldLogs(ctx, c, runs, r.cfg.Batch)
			return read, n, runs, err
		}},
		{KindJobs, r.cfg.Jobs, r.rows(job.DeleteFinished)},
		{KindSessions, r.cfg.Sessions, r.rows(auth.DeleteOldSessions)},
		{KindNotifications, r.cfg.Notifications, r.rows(notify.DeleteReadNotifications)},
		{KindWebhooks, r.cfg.Deliveries, r.rows(webhook.DeleteOldDeliveries)},
		{KindDigests, r.cfg.Deliveries, r.rows(digest.DeleteOldDigests)},
	}
	for _, k := range kinds {
		if k.keep <= 0 {
			continue
		}
		cutoff := now.Add(-k.keep)
		for b := 0; ; b++ {
			if err := ctx.Err(); err != nil {
				return rep, true, err
			}
			if b == r.cfg.MaxBatches {
				more = true
				break
			}
			read, n, full, err := k.del(ctx, cutoff)
			r.deleted(rep, k.kind, n)
			if err != nil {
				return rep, more, fmt.Errorf("retention of %s: %w", k.kind, err)
			}
			if read < full {
				break
			}
		}
	}
	if r.cfg.Runners > 0 {
		removed, err := r.runs.RemoveGoneRunners(ctx, now.Add(-r.cfg.Runners), r.cfg.Runners)
		r.deleted(rep, KindRunners, len(removed))
		for _, name := range removed {
			r.log.Info("retention: removed a runner gone longer than the retention", "runner", name, "retention", r.cfg.Runners)
		}
		if err != nil {
			return rep, more, fmt.Errorf("retention of %s: %w", KindRunners, err)
		}
	}
	if total := rep.total(); total > 0 {
		r.log.Info("retention: deleted old data", "run_log_chunks", rep[KindRunLogs], "jobs", rep[KindJobs], "sessions", rep[KindSessions],
			"notifications", rep[KindNotifications], "webhook_deliveries", rep[KindWebhooks], "digests", rep[KindDigests],
			"runners", rep[KindRunners], "more", more)
	}
	return rep, more, nil
}

// rows adapts an owner's delete of up to Batch rows.
func (r *Retention) rows(del func(context.Context, store.Store, time.Time, int) (int, int, error)) func(context.Context, time.Time) (int, int, int, error) {
	return func(ctx context.Context, cutoff time.Time) (int, int, int, error) {
		read, n, err := del(ctx, r.store, cutoff, r.cfg.Batch)
		return read, n, r.cfg.Batch, err
	}
}

// deleted counts n rows of kind.
func (r *Retention) deleted(rep Report, kind string, n int) {
	if n <= 0 {
		return
	}
	rep[kind] += n
	r.cfg.Metrics.deleted(kind, n)
}

func (rep Report) total() int {
	n := 0
	for _, v := range rep {
		n += v
	}
	return n
}
