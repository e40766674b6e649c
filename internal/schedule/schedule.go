// Package schedule is Core's scheduler (spec pipelines.md "Scheduling"): it
// starts pipelines without human action.
//
// A ticket is runnable when it is `ready`, its project has a repository
// configured, and every item that blocks it — or blocks its epic — is
// `done` or `cancelled`. Runnable tickets start oldest first (created_at,
// then number), as long as the concurrency limits allow: per project (the
// project's concurrency_limit) and platform-wide (the platform row's
// concurrency_limit, else Config.PlatformLimit). A flow occupies a slot
// while it runs a stage or waits for checks (flows.status = 'running') —
// not while it waits for a human (approval, review, merge, answer), for
// budget or for a pause ('waiting'). Nothing starts in a paused project,
// and nothing at all while the platform is paused.
//
// Resolving a blocker, moving a ticket to `ready` or finishing a flow
// starts the next tickets within seconds: Core calls Nudge after the
// commit of every event that Wakes names, which runs a pass at once; a
// periodic pass (Config.Interval) is the safety net.
//
// A pass reads (one small query for the platform, one for the candidates,
// with the limits applied in SQL) and then starts each candidate through
// the flow engine's optimistic start. Two passes — in one process or in
// two instances — therefore never start the same ticket twice: the loser
// of the race gets a conflict, which the pass skips. The limits are read,
// not locked: passes running at the same moment may together exceed a
// limit by the tickets they start concurrently, which is why only the
// leader runs the scheduler.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Actor is the scheduler in the events of the flows it starts.
var Actor = event.Actor{Kind: event.ActorSystem, Sub: "scheduler"}

// Starter starts a ready ticket's pipeline; *flow.Service is one. A ticket
// that is not ready any more, or already has an active flow, must come back
// as an apperr.Conflict.
type Starter interface {
	Start(ctx context.Context, actor event.Actor, itemRef string) (flow.Flow, error)
}

// StarterFunc adapts a function to Starter.
type StarterFunc func(ctx context.Context, actor event.Actor, itemRef string) (flow.Flow, error)

// Start calls f.
func (f StarterFunc) Start(ctx context.Context, actor event.Actor, itemRef string) (flow.Flow, error) {
	return f(ctx, actor, itemRef)
}

// DefaultInterval is the safety-net pass interval.
const DefaultInterval = 10 * time.Second

// Config holds the scheduler's knobs ([scheduler] in the configuration).
type Config struct {
	// Interval between safety-net passes (10s when ≤ 0). Nudge runs a pass
	// at once.
	Interval time.Duration
	// PlatformLimit is the platform-wide limit of running flows when the
	// platform row sets none: the effective platform limit is
	// platform.concurrency_limit when it is > 0, else PlatformLimit; 0 (or
	// less) means no limit.
	PlatformLimit int
	// Metrics records starts and pass durations; nil records nothing.
	Metrics *Metrics
}

// Scheduler starts runnable tickets. Pass and Run may be called
// concurrently, also by other instances on the same database.
type Scheduler struct {
	store   store.Store
	clock   clock.Clock
	log     *slog.Logger
	starter Starter
	cfg     Config
	wake    *clock.Waker
}

// New returns a scheduler. log may be nil.
func New(s store.Store, c clock.Clock, log *slog.Logger, starter Starter, cfg Config) *Scheduler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.PlatformLimit < 0 {
		cfg.PlatformLimit = 0
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Scheduler{store: s, clock: c, log: log, starter: starter, cfg: cfg, wake: clock.NewWaker()}
}

// Wakes reports whether an event of this type can make a ticket runnable
// or free a slot, so that OnCommit nudges the scheduler after its commit:
//
//   - ticket.created: a ticket created as ready;
//   - ticket.state_changed, epic.state_changed: a ticket moved to ready, or
//     a blocker (ticket or epic) became done or cancelled — also a flow
//     finishing moves its ticket;
//   - ticket.updated: a ticket moved out of a blocked epic, or an epic
//     became a ticket;
//   - ticket.blocker_removed, epic.blocker_removed: a blocker was removed
//     from a ticket or from its epic;
//   - project.updated: a repository was configured, the project resumed
//     or its limit was raised;
//   - platform.*: the platform resumed or its limit changed;
//   - flow.*: a flow finished (done, failed, stopped) or went waiting for a
//     human, which frees its slot (flow.stage_started into a human stage
//     does too).
func Wakes(eventType string) bool {
	return wakers[eventType] || strings.HasPrefix(eventType, "platform.")
}

// wakers are the event types of Wakes, platform.* apart.
var wakers = map[string]bool{
	event.TypeOf[tracker.TicketCreated]():        true,
	event.TypeOf[tracker.TicketStateChanged]():   true,
	event.TypeOf[tracker.EpicStateChanged]():     true,
	event.TypeOf[tracker.TicketUpdated]():        true,
	event.TypeOf[tracker.TicketBlockerRemoved](): true,
	event.TypeOf[tracker.EpicBlockerRemoved]():   true,
	event.TypeOf[tenancy.ProjectUpdated]():       true,
	// A flow frees its slot when it ends or starts waiting for a human,
	// budget or a pause (a human stage's entry is flow.stage_started).
	event.TypeOf[flow.FlowDone]():     true,
	event.TypeOf[flow.FlowFailed]():   true,
	event.TypeOf[flow.FlowStopped]():  true,
	event.TypeOf[flow.FlowWaiting]():  true,
	event.TypeOf[flow.FlowStuck]():    true,
	event.TypeOf[flow.StageStarted](): true,
}

// OnCommit is the scheduler's subscriber (transition.Subscriber): a
// committed event that Wakes it nudges it.
func (s *Scheduler) OnCommit(c transition.Committed) {
	for _, e := range c.Events {
		if Wakes(e.Type) {
			s.Nudge()
			return
		}
	}
}

// Nudge asks for a pass at once. It never blocks; nudges that arrive
// during a pass coalesce into one more pass after it.
func (s *Scheduler) Nudge() { s.wake.Nudge() }

// Run runs a pass at once, then one after every Nudge and, without nudges,
// every Interval, until ctx ends. Errors of a pass are logged; the next
// pass tries again.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		s.runPass(ctx)
		if !s.wake.Wait(ctx, s.clock, s.cfg.Interval) {
			return
		}
	}
}

func (s *Scheduler) runPass(ctx context.Context) {
	res, err := s.Pass(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.log.Error("scheduler pass", "err", err)
	}
	for _, e := range res.Errors {
		s.log.Warn("scheduler could not start a ticket", "err", e)
	}
}

// Result is what a pass did.
type Result struct {
	Paused    bool     // the platform is paused: nothing was considered
	Started   []string // keys of the tickets started, in order
	Conflicts int      // starts skipped: someone started the ticket first, or it changed
	Errors    []error  // starts that failed otherwise (the ticket is tried again next pass)
}

// maxRounds bounds the re-reads of a pass after skipped starts.
const maxRounds = 5

// Pass starts the runnable tickets that the limits allow, oldest first.
// A start that conflicts is skipped; when a start is skipped or fails, the
// pass reads again (a few times at most), so that one ticket that cannot
// start does not hold back the ones behind it. It returns an error only
// when reading fails or ctx ends.
func (s *Scheduler) Pass(ctx context.Context) (Result, error) {
	began := s.clock.Now()
	defer func() { s.cfg.Metrics.observePass(s.clock.Now().Sub(began)) }()
	var res Result
	var skip []string
	for range maxRounds {
		paused, free, err := s.platform(ctx)
		if err != nil {
			return res, err
		}
		if paused {
			res.Paused = true
			return res, nil
		}
		if free == 0 {
			return res, nil
		}
		cands, err := s.candidates(ctx, free, skip)
		if err != nil {
			return res, err
		}
		skipped := false
		for _, c := range cands {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			_, err := s.starter.Start(ctx, Actor, c.id)
			switch {
			case err == nil:
				res.Started = append(res.Started, c.key)
				s.cfg.Metrics.started()
				s.log.Info("scheduler started ticket", "ticket", c.key)
				continue
			case ctx.Err() != nil:
				return res, ctx.Err()
			case conflict(err):
				res.Conflicts++
				s.log.Debug("scheduler skipped ticket: started or changed meanwhile", "ticket", c.key, "err", err)
			default:
				res.Errors = append(res.Errors, fmt.Errorf("start %s: %w", c.key, err))
			}
			skip = append(skip, c.id)
			skipped = true
		}
		if !skipped {
			break
		}
	}
	return res, nil
}

// conflict reports whether a start lost to another start or to a change.
func conflict(err error) bool {
	return apperr.Code(err) == apperr.Conflict || errors.Is(err, store.ErrLostRace)
}

// platform reads the kill switch and how many more flows may run
// platform-wide (-1: no limit).
func (s *Scheduler) platform(ctx context.Context) (paused bool, free int, err error) {
	rows, err := s.store.Query(ctx, `SELECT paused, concurrency_limit, (SELECT COUNT(*) FROM flows WHERE status = 'running') FROM platform WHERE id = 1`)
	if err != nil {
		return false, 0, fmt.Errorf("read platform: %w", err)
	}
	if rows.Len() == 0 {
		return false, 0, errors.New("read platform: the platform row is missing")
	}
	var limit, running int
	if err := rows.Scan(0, &paused, &limit, &running); err != nil {
		return false, 0, fmt.Errorf("read platform: %w", err)
	}
	if limit <= 0 {
		limit = s.cfg.PlatformLimit
	}
	if limit <= 0 {
		return paused, -1, nil
	}
	return paused, max(limit-running, 0), nil
}

// candidate is a runnable ticket within the limits, as read.
type candidate struct{ id, key string }

// candidatesSQL selects the runnable tickets, oldest first, that the
// project limits allow. open: the projects that may start tickets, with
// their running flows (busy) counted once per project; ready: their
// runnable tickets, ranked oldest first within each project; only as many
// as the project has free slots are selected. The CROSS JOIN makes SQLite
// look up each project's ready tickets on items_state instead of scanning
// every item. %s is the exclusion of tickets skipped earlier in the pass.
const candidatesSQL = `WITH open AS MATERIALIZED (
    SELECT p.id, p.concurrency_limit AS lim,
        (SELECT COUNT(*) FROM flows f WHERE f.project_id = p.id AND f.status = 'running') AS busy
    FROM projects p
    WHERE p.repo_forge IS NOT NULL AND p.repo_forge <> '' AND p.paused = 0
), ready AS (
    SELECT i.id, i.key, i.created_at, i.number, o.lim, o.busy,
        ROW_NUMBER() OVER (PARTITION BY i.project_id ORDER BY i.created_at, i.number) AS pos
    FROM open o CROSS JOIN items i
    WHERE (o.lim <= 0 OR o.busy < o.lim)
      AND i.project_id = o.id AND i.state = 'ready' AND i.type <> 'epic'
      AND NOT EXISTS (SELECT 1 FROM blockers x JOIN items bi ON bi.id = x.blocker_id
          WHERE x.item_id = i.id AND bi.state NOT IN ('done', 'cancelled'))
      AND (i.epic_id IS NULL OR NOT EXISTS (SELECT 1 FROM blockers x JOIN items bi ON bi.id = x.blocker_id
          WHERE x.item_id = i.epic_id AND bi.state NOT IN ('done', 'cancelled')))
      AND NOT EXISTS (SELECT 1 FROM flows f WHERE f.item_id = i.id AND f.status IN ('running', 'waiting'))%s
)
SELECT id, key FROM ready
WHERE lim <= 0 OR pos <= lim - busy
ORDER BY created_at, number, id
LIMIT ?`

// candidates reads at most limit (-1: all) runnable tickets within the
// project limits, leaving out skip.
func (s *Scheduler) candidates(ctx context.Context, limit int, skip []string) ([]candidate, error) {
	exclude := ""
	args := make([]any, 0, len(skip)+1)
	if len(skip) > 0 {
		exclude = "\n      AND i.id NOT IN (?" + strings.Repeat(", ?", len(skip)-1) + ")"
		for _, id := range skip {
			args = append(args, id)
		}
	}
	args = append(args, limit)
	rows, err := s.store.Query(ctx, fmt.Sprintf(candidatesSQL, exclude), args...)
	if err != nil {
		return nil, fmt.Errorf("read runnable tickets: %w", err)
	}
	out := make([]candidate, rows.Len())
	for i := range out {
		if err := rows.Scan(i, &out[i].id, &out[i].key); err != nil {
			return nil, fmt.Errorf("read runnable tickets: %w", err)
		}
	}
	return out, nil
}
