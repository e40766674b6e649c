// Package transition writes state changes the way ADR-0016 requires: read,
// decide in pure code, then commit one atomic batch holding the optimistic
// update(s) with their lost-race guards, the event(s) and the jobs the change
// causes. A change without its event, or an event without its change, cannot
// be committed: they are one batch.
package transition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
)

// Guard is the statement that fails the batch when the statement right
// before it changed no row (the lost-race guard, DESIGN.md "Storage").
var Guard = store.Stmt(`INSERT INTO race_guard (lost) SELECT 1 WHERE changes() = 0`)

// Transition is one state change.
type Transition struct {
	// Events are the change's events, usually exactly one. At least one is
	// required. ID and OccurredAt are filled in when empty.
	Events []event.Event
	// Guarded statements must each change at least one row, or the batch
	// is a lost race: typically UPDATE … WHERE id = ? AND version = ?, or an
	// INSERT … ON CONFLICT DO NOTHING that must not have conflicted.
	Guarded []store.Statement
	// Statements run unguarded after the guarded ones (inserts of new
	// rows, for instance; a conflict there fails the batch).
	Statements []store.Statement
	// Jobs are enqueued in the same batch.
	Jobs []job.Spec
}

// Add appends parts to t and returns t: each part's events after t's, in
// order, and likewise its guarded statements, statements and jobs. A part is
// a piece of a change that the owner of a table builds in pure code for a
// caller to write within its own transition (tracker.FlowMove, run.Create,
// auth.Issue …), so that the whole change is one batch without anyone
// fixing up another's slices by position.
func (t *Transition) Add(parts ...Transition) *Transition {
	for _, p := range parts {
		t.Events = append(t.Events, p.Events...)
		t.Guarded = append(t.Guarded, p.Guarded...)
		t.Statements = append(t.Statements, p.Statements...)
		t.Jobs = append(t.Jobs, p.Jobs...)
	}
	return t
}

// Committed describes a transition that was written.
type Committed struct {
	Events  []event.Event
	HasJobs bool
}

// A Subscriber reacts to a committed transition: it wakes a loop, counts a
// metric. It runs on the committing goroutine, so it must not block or
// write. Each package exports its own (feed.Feed.OnCommit,
// schedule.Scheduler.OnCommit, run.Service.OnCommit, …); Core lists them.
type Subscriber func(Committed)

// WakeOnJobs is the job orchestrator's subscriber: wake (its Notify) is
// called after each transition that enqueued jobs.
func WakeOnJobs(wake func()) Subscriber {
	return func(c Committed) {
		if c.HasJobs {
			wake()
		}
	}
}

// Applier commits transitions.
type Applier struct {
	Store store.Store
	Clock clock.Clock
	// RetryFor bounds, on Clock, how long Do goes on retrying lost races
	// (DefaultRetryFor when ≤ 0).
	RetryFor time.Duration
	// Attempts bounds how often Do decides in all (DefaultAttempts when
	// ≤ 0): a backstop behind RetryFor.
	Attempts int
	// Resends bounds how often a batch whose outcome was unknown is sent
	// again (default 5).
	Resends int
	// MaxAttempts is how often a job it enqueues runs before it is dead,
	// unless its Spec says ([jobs] max_attempts; job.DefaultMaxAttempts
	// when ≤ 0).
	MaxAttempts int

	subscribers []Subscriber // see Subscribe

	laneOnce sync.Once
	lane     chan struct{} // Do's retry queue: one retrier at a time, first come first served
}

// Defaults of Do's bounds.
const (
	DefaultRetryFor = 5 * time.Second
	DefaultAttempts = 100
)

// ErrGaveUp is returned by Do when it stopped retrying lost races.
var ErrGaveUp = errors.New("transition gave up")

// Batch returns the statements of t in the order they are executed: the
// events first (so that a re-sent batch that had committed fails at once on
// the event's unique id), then each guarded statement followed by the guard,
// then the other statements, then the job inserts. ids for jobs come from
// newID; a job whose Spec leaves MaxAttempts at zero gets
// job.DefaultMaxAttempts.
func (t *Transition) Batch(now time.Time, newID func() string) ([]store.Statement, error) {
	return t.batch(now, newID, 0)
}

// batch is Batch with the attempts of the jobs that name none.
func (t *Transition) batch(now time.Time, newID func() string, maxAttempts int) ([]store.Statement, error) {
	if len(t.Events) == 0 {
		return nil, errors.New("transition without an event: every change must record one")
	}
	var out []store.Statement
	for i := range t.Events {
		e := &t.Events[i]
		if e.ID == "" {
			e.ID = newID()
		}
		if e.OccurredAt.IsZero() {
			e.OccurredAt = now
		}
		if err := e.Validate(); err != nil {
			return nil, err
		}
		out = append(out, e.Insert())
	}
	for _, g := range t.Guarded {
		out = append(out, g, Guard)
	}
	out = append(out, t.Statements...)
	for _, j := range t.Jobs {
		if j.MaxAttempts <= 0 {
			j.MaxAttempts = maxAttempts
		}
		st, err := j.Insert(newID(), now)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Stale turns a lost race of a write guarded by a version the caller sent
// (or read) into a conflict naming what changed; other errors stay as they
// are.
func Stale(err error, what string) error {
	if errors.Is(err, store.ErrLostRace) {
		return apperr.New(apperr.Conflict, "%s was changed by someone else (stale version): read it again and retry", what)
	}
	return err
}

// NewID returns a new UUIDv7.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Apply commits t once. A lost race returns an error matching
// store.ErrLostRace. A batch whose outcome was unknown is sent again, as is:
// if the first send had committed, the second fails on the event's unique
// id, which proves the commit; if it had not, the second send applies it
// (the version checks make a double application impossible).
func (a *Applier) Apply(ctx context.Context, t *Transition) error {
	batch, err := t.batch(a.Clock.Now(), NewID, a.MaxAttempts)
	if err != nil {
		return err
	}
	resends := a.Resends
	if resends <= 0 {
		resends = 5
	}
	_, err = a.Store.Exec(ctx, batch...)
	for i := 0; errors.Is(err, store.ErrUnknownOutcome) && i < resends; i++ {
		if werr := a.wait(ctx, time.Duration(100*(1<<i))*time.Millisecond); werr != nil {
			return fmt.Errorf("%w (while resolving: %w)", err, werr)
		}
		_, err = a.Store.Exec(ctx, batch...)
		if store.UniqueOn(err, "events.id") {
			err = nil // the earlier send had committed
		}
	}
	if err != nil {
		return fmt.Errorf("apply %s: %w", t.Events[0].Type, err)
	}
	for _, e := range t.Events {
		fault.Hit("commit:" + e.Type) // the failure suite's crash points
	}
	c := Committed{Events: t.Events, HasJobs: len(t.Jobs) > 0}
	for _, s := range a.subscribers {
		s(c)
	}
	return nil
}

// Subscribe adds subscribers, called in order after every committed
// transition. Call it before the Applier is first used: Core does, once,
// at the end of core.New, because what they wake (the scheduler, the
// runners' long polls) is built on this Applier.
func (a *Applier) Subscribe(s ...Subscriber) { a.subscribers = append(a.subscribers, s...) }

func (a *Applier) wait(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, a.Clock, d)
}

// Do runs read-decide-write until it commits: decide reads what it needs
// and returns the transition to apply (nil: nothing to do). On a lost race
// it is called again, on a fresh read.
//
// Retries are fair: a caller that lost a race joins this applier's retry
// queue and retries only when its turn comes (first come, first served),
// staying first until it commits or gives up. A burst of writers that all
// read the same row (creators taking numbers from one key counter) thus
// commits one after the other, each retry on a read that no queued writer
// can make stale, instead of all re-reading and colliding again on every
// round. Only newcomers' first attempts and other processes still compete
// with the head of the queue, so it retries at once, without a backoff.
//
// Do gives up (ErrGaveUp, which also matches store.ErrLostRace) when a
// race is lost after RetryFor has passed since it began (a caller that
// waited its turn longer than that still gets one retry), or after Attempts
// decisions. A decide that compares a version the caller sent returns its
// own conflict on the re-read, at the first retry.
func (a *Applier) Do(ctx context.Context, decide func(ctx context.Context) (*Transition, error)) (*Transition, error) {
	attempts, retryFor := a.Attempts, a.RetryFor
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	if retryFor <= 0 {
		retryFor = DefaultRetryFor
	}
	began := a.Clock.Now()
	queued := false
	defer func() {
		if queued {
			<-a.lane
		}
	}()
	for i := 1; ; i++ {
		t, err := decide(ctx)
		if err != nil || t == nil {
			return nil, err
		}
		err = a.Apply(ctx, t)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, store.ErrLostRace) {
			return nil, err
		}
		if took := a.Clock.Now().Sub(began); i >= attempts || took >= retryFor {
			return nil, fmt.Errorf("%w after %d lost races in %s: %w", ErrGaveUp, i, took, store.ErrLostRace)
		}
		if !queued && ctx.Value(laneKey{}) != a {
			if err := a.queue(ctx); err != nil {
				return nil, err
			}
			queued = true
			// A Do nested in decide must not queue behind its caller.
			ctx = context.WithValue(ctx, laneKey{}, a)
		}
	}
}

// laneKey marks a context whose Do holds the retry queue of an applier.
type laneKey struct{}

// queue waits for the caller's turn to retry.
func (a *Applier) queue(ctx context.Context) error {
	a.laneOnce.Do(func() { a.lane = make(chan struct{}, 1) })
	select {
	case a.lane <- struct{}{}: // blocked senders are served in order
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait to retry a lost race: %w", ctx.Err())
	}
}
