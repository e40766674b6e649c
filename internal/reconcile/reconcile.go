// Package reconcile is Core's reconciler (spec pipelines.md "Recovery and
// stuck stages", data.md "Durable jobs"). It checks every active flow
// periodically ([reconciler] interval, default one minute), on the leader
// only:
//
//  1. a flow whose ticket is no longer in_progress or waiting_for_answer (a
//     human paused or cancelled it) is stopped, and its run cancelled;
//  2. a stage run that made no progress beyond its timeout (the stage's
//     timeout_minutes, else two hours) plus [reconciler] slack is
//     cancelled, and the flow is flagged;
//  3. the step a flow waits for — entering a stage, handling a finished
//     run, checking a pull request, resuming after the last answer — is
//     queued again when it was lost; when it failed for good (its job is
//     dead) the flow is flagged;
//  4. stage runs that no flow waits for any more are cancelled;
//  5. flows waiting for budget are released when budget is back (and flows
//     waiting for a pause that ended, whose release job was lost).
//
// Runners gone for good are removed by retention ([retention] runners,
// internal/retention), not here.
//
// It also logs, once, each flow that has come to need attention
// (flow.Attentions: an agent run no runner leased within [runs]
// unclaimed_after, or that no live runner could lease). That is no repair:
// the attention is derived whenever a flow is read. It records one event,
// flow.runner_missing, per queued run that no runner takes (the notifier
// tells the project's admins: runner.missing).
//
// Flagging records flow.stuck with the reason, raises a blocking question
// on the ticket and makes the flow wait for an answer (the ticket is
// waiting_for_answer).
//
// A pass is a handful of indexed queries that find what is wrong — none per
// flow — and then one read-decide-write per repair. Every repair re-reads
// what it repairs and is guarded by the optimistic version of the flow (or
// of the run): two passes, or a pass racing the orchestrator, never apply a
// repair twice, and a pass that finds nothing wrong writes nothing. A step
// whose job is pending or running is not lost. Re-queueing a lost step
// inserts its job with the same dedupe key, guarded by the flow's version;
// it changes no tracked entity, so it records no event, but it is logged
// and counted like every repair (ballet_reconciler_repairs_total{rule}).
package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
)

// Defaults.
const (
	DefaultInterval = time.Minute
)

// Rules, the values of the rule label of ballet_reconciler_repairs_total.
const (
	RuleStopped  = "stopped"  // 1: the ticket was paused or cancelled: flow stopped, run cancelled
	RuleStalled  = "stalled"  // 2: a run made no progress: run cancelled, flow flagged
	RuleRequeued = "requeued" // 3: a lost step was queued again
	RuleDead     = "dead"     // 3: a step failed for good: flow flagged
	RuleOrphaned = "orphaned" // 4: a run no flow waits for was cancelled
	RuleReleased = "released" // 5: a flow waiting for budget (or an ended pause) was released
)

// Rules lists every rule label.
var Rules = []string{RuleStopped, RuleStalled, RuleRequeued, RuleDead, RuleOrphaned, RuleReleased}

// Config holds the reconciler's knobs ([reconciler] in the configuration)
// and the budget hooks.
type Config struct {
	// Interval between passes (DefaultInterval when ≤ 0).
	Interval time.Duration
	// Slack is added to a stage's timeout before its run counts as stalled
	// (0 is allowed).
	Slack time.Duration
	// BudgetOK, if set, is asked first whether a flow waiting for budget
	// may go on; false leaves it waiting without calling Release.
	BudgetOK func(ctx context.Context, f flow.Flow) (bool, error)
	// Release releases a flow waiting for budget or a pause when its reason
	// to wait is gone (flow.Service.Release: it re-checks both, and reports
	// whether it released). Nil skips rule 5.
	Release func(ctx context.Context, flowID string) (bool, error)
	// MaxAttempts is how often a step queued again runs before it is dead
	// ([jobs] max_attempts; job.DefaultMaxAttempts when ≤ 0).
	MaxAttempts int
	// Metrics records repairs and pass durations; nil records nothing.
	Metrics *Metrics
	// WakeJobs is called after a lost step was queued again (the job
	// orchestrator's Notify), so that it runs at once; nil wakes nothing
	// (the orchestrator finds it at its next poll).
	WakeJobs func()
}

// Reconciler repairs flows. Pass and Run may be called concurrently, also
// by other instances on the same database (only the leader should).
type Reconciler struct {
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	flows *flow.Service
	runs  *run.Service
	cfg   Config

	mu    sync.Mutex                     // one pass at a time in this instance
	defs  map[string]pipeline.Definition // pinned definitions of flows with a running stage, by flow id
	noted map[string]bool                // flows needing attention that were logged, by flow, attention and run
}

// New returns a reconciler. log may be nil.
func New(s store.Store, c clock.Clock, log *slog.Logger, flows *flow.Service, runs *run.Service, cfg Config) *Reconciler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Slack < 0 {
		cfg.Slack = 0
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Reconciler{store: s, clock: c, log: log, flows: flows, runs: runs, cfg: cfg, defs: map[string]pipeline.Definition{}, noted: map[string]bool{}}
}

// Report counts the repairs of a pass by rule.
type Report struct {
	Stopped  int `json:"stopped"`  // rule 1
	Stalled  int `json:"stalled"`  // rule 2
	Requeued int `json:"requeued"` // rule 3, lost steps
	Dead     int `json:"dead"`     // rule 3, steps that failed for good
	Orphaned int `json:"orphaned"` // rule 4
	Released int `json:"released"` // rule 5
}

// Total is the number of repairs.
func (r Report) Total() int {
	return r.Stopped + r.Stalled + r.Requeued + r.Dead + r.Orphaned + r.Released
}

// add counts one repair of rule.
func (r *Report) add(rule string) {
	switch rule {
	case RuleStopped:
		r.Stopped++
	case RuleStalled:
		r.Stalled++
	case RuleRequeued:
		r.Requeued++
	case RuleDead:
		r.Dead++
	case RuleOrphaned:
		r.Orphaned++
	case RuleReleased:
		r.Released++
	}
}

// Run runs a pass at once and then every Interval on the reconciler's
// clock, until ctx ends. Errors of a pass are logged; the next pass tries
// again.
func (r *Reconciler) Run(ctx context.Context) {
	for {
		rep, err := r.Pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Error("reconciler pass", "err", err)
		}
		if rep.Total() > 0 { // each repair was logged at Info already
			r.log.Debug("reconciler pass repaired flows", "stopped", rep.Stopped, "stalled", rep.Stalled, "requeued", rep.Requeued,
				"dead", rep.Dead, "orphaned", rep.Orphaned, "released", rep.Released)
		}
		t := r.clock.NewTimer(r.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Pass checks every active flow once and repairs what is wrong, rule by
// rule. A repair that fails does not stop the others: the pass returns
// what it repaired and every error, joined.
func (r *Reconciler) Pass(ctx context.Context) (Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	began := r.clock.Now()
	defer func() { r.cfg.Metrics.observePass(r.clock.Now().Sub(began)) }()
	var rep Report
	var errs []error
	for _, rule := range []func(context.Context, *Report) error{
		r.stopFlows, r.flagStalled, r.repairSteps, r.cancelOrphans, r.release, r.noteAttention,
	} {
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		if err := rule(ctx, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// repaired counts, logs and records one repair.
func (r *Reconciler) repaired(rep *Report, rule, msg string, attrs ...any) {
	rep.add(rule)
	r.cfg.Metrics.repaired(rule)
	r.log.Info("reconciler: "+msg, append([]any{"rule", rule}, attrs...)...)
}

// now is the current time at stored precision.
func (r *Reconciler) now() time.Time { return r.clock.Now().Truncate(time.Millisecond) }
