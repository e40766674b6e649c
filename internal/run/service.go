package run

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/lru"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Defaults and limits.
const (
	DefaultGrace = 2 * time.Minute                     // a running run without a heartbeat for this long fails
	MaxLeaseWait = runproto.MaxLeaseWait * time.Second // the longest long poll of a lease (bounds.LeaseWait)
	DefaultPoll  = 200 * time.Millisecond
	// RunTokenTTL bounds a run token's life in case nothing revoked it
	// (a finish and the sweep revoke it much earlier).
	RunTokenTTL = 7 * 24 * time.Hour
	MaxReport   = 64 << 10 // bytes of a report's summary
)

// Config tunes a Service; zero fields take the defaults.
type Config struct {
	// Grace is how long a running run may go without a heartbeat before
	// SweepSilent fails it (default 2m). RunSweeper sweeps every Grace/4.
	Grace time.Duration
	// LeaseWait caps a lease's long poll (default and at most 60s).
	LeaseWait time.Duration
	// Poll is how often a waiting lease re-reads the queue (default 200ms);
	// runs created in this process wake it at once (Notify).
	Poll time.Duration
	// Log receives the sweeper's errors (default: discarded).
	Log *slog.Logger
	// LogLimit is how many bytes of a run's log are kept (default
	// DefaultLogLimit): the rest is dropped and the log marked truncated.
	LogLimit int64
	// LogRetention: a run's log is deleted this long after the run ended
	// ([retention] run_logs); from then on reading it answers 410, also
	// before the retention job has got to it. 0 keeps logs until they
	// are deleted (DeleteOldLogs).
	LogRetention time.Duration
	// OnFinish returns the jobs enqueued with every run that reaches a
	// final status (the flow engine's flow.OnRunFinished); nil enqueues
	// none.
	OnFinish FinishHook
	// Sessions builds the session a lease hands out (the flow engine's
	// flow.Sessions); nil hands out an empty one.
	Sessions SessionSource
}

// Service keeps the runs: the flow engine creates and cancels them
// (Create, Cancel), readers read them (Get, List, ForFlowStep), and a run
// ends with its usage counted (finish.go). The runner protocol's server
// side (lease.go, runner.go, log.go) and the agent session's side
// (agent.go) act on them through it.
type Service struct {
	store   store.Store
	applier *transition.Applier
	clock   clock.Clock
	tracker *tracker.Service
	cfg     Config
	log     *slog.Logger
	// started is when this Core started: a runner could not heartbeat
	// while Core was down, so no run is silent before a grace period has
	// passed since (a Core restart alone disturbs no session).
	started time.Time

	mu      sync.Mutex
	wake    chan struct{} // closed and replaced by Notify
	waiting int           // leases between polls, found nothing, waiting

	transcripts *lru.Cache[string, TranscriptPage] // finished runs' transcripts by run id, parsed once
}

// NewService returns a Service.
func NewService(st store.Store, a *transition.Applier, c clock.Clock, t *tracker.Service, cfg Config) *Service {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.LeaseWait <= 0 || cfg.LeaseWait > MaxLeaseWait {
		cfg.LeaseWait = MaxLeaseWait
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.LogLimit <= 0 {
		cfg.LogLimit = DefaultLogLimit
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, applier: a, clock: c, tracker: t, cfg: cfg, log: log, wake: make(chan struct{}), started: c.Now(),
		transcripts: lru.New[string](transcriptCacheBytes, transcriptSize)}
}

// finished returns the jobs of the finish hook for r.
func (s *Service) finished(r Run) []job.Spec {
	if s.cfg.OnFinish == nil {
		return nil
	}
	return s.cfg.OnFinish(r)
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// OnCommit is the service's subscriber (transition.Subscriber): a
// committed run.created wakes the leases waiting in this process.
func (s *Service) OnCommit(c transition.Committed) {
	for _, e := range c.Events {
		if e.Type == "run.created" {
			s.Notify()
			return
		}
	}
}

// Notify wakes every lease waiting in this process: a run was created
// (OnCommit calls it when run.created commits). Leases in other Core
// instances find the run at their next poll.
func (s *Service) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Service) woken() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

// Waiting returns how many leases of this process wait now: each has
// found the queue empty and waits for Notify or its next poll (tests wait
// for this before they create the run a waiting lease must get).
func (s *Service) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *Service) addWaiting(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting += n
}

// now is the current time at the stored precision.
func (s *Service) now() time.Time { return s.clock.Now().Truncate(time.Millisecond) }

// RunnerCaller is a runner token acting on the runner protocol, as the
// HTTP layer resolved its credential: the token's id (the runners it
// registered, and the runs they leased, are bound to it) and the actor its
// changes record. The agent session's side takes no caller: the run it
// acts on is its caller (ActorOf).
type RunnerCaller struct {
	TokenID string
	Actor   event.Actor
}

// Get returns a run by id.
func (s *Service) Get(ctx context.Context, id string) (Run, error) {
	runs, err := queryRuns(ctx, s.store, `r.id = ?`, id)
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 {
		return Run{}, runNotFound(id)
	}
	return runs[0], nil
}

// ForFlowStep returns the run of a flow's step, if it was created.
func (s *Service) ForFlowStep(ctx context.Context, flowID string, step int) (Run, bool, error) {
	runs, err := queryRuns(ctx, s.store, `r.flow_id = ? AND r.step = ?`, flowID, step)
	if err != nil || len(runs) == 0 {
		return Run{}, false, err
	}
	return runs[0], true, nil
}

// Latest returns a flow's runs up to step, newest first, at most limit.
func (s *Service) Latest(ctx context.Context, flowID string, step, limit int) ([]Run, error) {
	return queryRuns(ctx, s.store, `r.flow_id = ? AND r.step <= ? ORDER BY r.step DESC LIMIT ?`, flowID, step, limit)
}

// List returns an item's runs, oldest first.
func (s *Service) List(ctx context.Context, itemID string) ([]Run, error) {
	return queryRuns(ctx, s.store, `r.item_id = ? ORDER BY r.created_at, r.id`, itemID)
}
