// Package consumer runs durable consumers of the event log: the notifier,
// the mailer, the webhook dispatcher — each reads the events after its
// cursor in seq order and records what they cause.
//
// A consumer keeps its cursor (the last seq it processed) in the database,
// one row of event_cursors per consumer, and advances it in the same
// atomic batch as what it writes for the events up to there, guarded by
// the old seq (ADR-0016: read, decide in pure code, write one batch). A
// crash before the batch leaves the cursor where it was, and the events
// are decided again; two consumers of the same name (two Core instances on
// rqlite) that read the same cursor cannot both commit: the second loses
// the race and reads again. So what a consumer writes for an event, it
// writes exactly once.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Defaults of a consumer's knobs.
const (
	DefaultInterval = 2 * time.Second
	DefaultBatch    = 500
	DefaultSettle   = 200 * time.Millisecond
)

// maxRaces bounds how often a pass reads again after losing its batch to
// another consumer before it leaves the rest to the next pass.
const maxRaces = 20

// Decider returns what a batch of events causes: a transition with the
// statements, events and jobs to write (nil or empty when nothing). It
// reads what it needs but writes nothing: the consumer writes its answer
// with the cursor's advance, in one batch.
type Decider func(ctx context.Context, evs []event.Event) (*transition.Transition, error)

// Consumer is one durable consumer of the event log. Pass and Run may run
// concurrently, also in other Core instances on the same database: the
// cursor's guard lets one of them commit each batch.
type Consumer struct {
	// Name is the consumer's row in event_cursors. A consumer whose row is
	// missing starts at the log's head: it is not run on the history
	// before it existed.
	Name    string
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	Log     *slog.Logger
	Decide  Decider
	// Wakes tells which committed event types nudge the consumer at once
	// (nil: none; it then finds them on its Interval).
	Wakes func(eventType string) bool
	// Interval between passes without a nudge (DefaultInterval when ≤ 0):
	// the events another instance wrote are found then.
	Interval time.Duration
	// Batch is how many events one batch decides (DefaultBatch when ≤ 0).
	Batch int
	// Settle is how soon committed events that do not wake the consumer
	// are passed over (DefaultSettle when ≤ 0): they cause nothing, but
	// the cursor moves past them within Settle rather than Interval, so
	// the consumer's lag stays small while the log grows fast (its own
	// events, the mailer's, the runs'), at the cost of at most one pass
	// per Settle.
	Settle time.Duration

	wake  chan struct{} // a nudge: pass at once
	later chan struct{} // events that do not wake it: pass within Settle
}

// Init makes the consumer ready; call it once before Run, Nudge or
// OnCommit.
func (c *Consumer) Init() *Consumer {
	c.wake, c.later = make(chan struct{}, 1), make(chan struct{}, 1)
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// OnCommit is the consumer's subscriber (transition.Subscriber): a
// committed event it Wakes for nudges it; other events ask for a pass
// within Settle.
func (c *Consumer) OnCommit(t transition.Committed) {
	for _, e := range t.Events {
		if c.Wakes != nil && c.Wakes(e.Type) {
			c.Nudge()
			return
		}
	}
	if len(t.Events) > 0 {
		signal(c.later)
	}
}

// Nudge asks for a pass at once; it never blocks.
func (c *Consumer) Nudge() { signal(c.wake) }

// signal leaves a signal on ch unless one is pending already: signals
// that come while the consumer is busy coalesce into one.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run passes at once, then after every nudge and at least every Interval,
// until ctx ends (the leader runs it). A pass's error is logged; the next
// pass tries again from the cursor.
func (c *Consumer) Run(ctx context.Context) {
	every := c.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	for {
		if _, err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.Log.Error("event log consumer pass (retried from the cursor)", "consumer", c.Name, "err", err)
		}
		if !c.wait(ctx, every) {
			return
		}
	}
}

// wait waits for a nudge, or for Settle after events that do not wake the
// consumer, or for every, and reports true; false when ctx ends first.
func (c *Consumer) wait(ctx context.Context, every time.Duration) bool {
	t := c.Clock.NewTimer(every)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.wake:
		return true
	case <-t.C():
		return true
	case <-c.later:
	}
	settle := c.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	s := c.Clock.NewTimer(settle)
	defer s.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.wake:
	case <-s.C():
	case <-t.C():
	}
	return true
}

// Pass processes the events after the cursor up to the log's head, batch
// by batch, and returns how many events its batches wrote. A batch lost to
// another consumer is read again from the fresh cursor.
func (c *Consumer) Pass(ctx context.Context) (wrote int, err error) {
	races := 0
	for {
		made, more, err := c.batch(ctx)
		switch {
		case errors.Is(err, store.ErrLostRace):
			if races++; races >= maxRaces {
				return wrote, nil
			}
			continue
		case err != nil:
			return wrote, err
		}
		wrote += made
		if !more {
			return wrote, nil
		}
	}
}

// Cursor returns the last seq the consumer named name processed; a
// consumer that never ran is at the log's head (its row is made so).
func Cursor(ctx context.Context, s store.Store, name string, now time.Time) (int64, error) {
	for range 2 {
		rows, err := s.Query(ctx, `SELECT seq FROM event_cursors WHERE name = ?`, name)
		if err != nil {
			return 0, fmt.Errorf("read the cursor of %s: %w", name, err)
		}
		if rows.Len() == 1 {
			var seq int64
			return seq, rows.Scan(0, &seq)
		}
		// Its first pass: it starts at the head. Two that start at once
		// insert one row; the other's insert does nothing.
		head, err := event.LastSeq(ctx, s)
		if err != nil {
			return 0, fmt.Errorf("start the cursor of %s: %w", name, err)
		}
		if _, err := s.Exec(ctx, store.Stmt(`INSERT OR IGNORE INTO event_cursors (name, seq, updated_at) VALUES (?, ?, ?)`,
			name, head, now.UnixMilli())); err != nil {
			return 0, fmt.Errorf("start the cursor of %s: %w", name, err)
		}
	}
	return 0, fmt.Errorf("the cursor of %s: not found after it was made", name)
}

// batch reads the events after the cursor (at most Batch), decides what
// they cause and writes it with the cursor's advance in one batch. more is
// true when the batch was full.
func (c *Consumer) batch(ctx context.Context) (made int, more bool, err error) {
	size := c.Batch
	if size <= 0 {
		size = DefaultBatch
	}
	from, err := Cursor(ctx, c.Store, c.Name, c.Clock.Now())
	if err != nil {
		return 0, false, err
	}
	evs, err := event.List(ctx, c.Store, event.Filter{AfterSeq: from, Limit: size})
	if err != nil || len(evs) == 0 {
		return 0, false, err
	}
	to := evs[len(evs)-1].Seq
	t, err := c.Decide(ctx, evs)
	if err != nil {
		return 0, false, fmt.Errorf("%s: events %d–%d: %w", c.Name, from+1, to, err)
	}
	now := c.Clock.Now().Truncate(time.Millisecond)
	adv := Advance(c.Name, from, to, now)
	if t == nil || (len(t.Statements) == 0 && len(t.Events) == 0 && len(t.Guarded) == 0) {
		// No change to record: the cursor alone moves, with the jobs the
		// events scheduled if any (bookkeeping of the consumer, as a job's
		// claim is: no event).
		stmts := []store.Statement{adv, transition.Guard}
		if t != nil {
			for _, j := range t.Jobs {
				st, err := j.Insert(transition.NewID(), now)
				if err != nil {
					return 0, false, fmt.Errorf("%s: a job of events %d–%d: %w", c.Name, from+1, to, err)
				}
				stmts = append(stmts, st)
			}
		}
		if _, err := c.Store.Exec(ctx, stmts...); err != nil {
			return 0, false, fmt.Errorf("advance the cursor of %s to %d: %w", c.Name, to, err)
		}
		return 0, len(evs) == size, nil
	}
	t.Guarded = append([]store.Statement{adv}, t.Guarded...)
	if err := c.Applier.Apply(ctx, t); err != nil {
		return 0, false, fmt.Errorf("%s: what events %d–%d cause: %w", c.Name, from+1, to, err)
	}
	return len(t.Events), len(evs) == size, nil
}

// Advance is the statement that moves the cursor name from the seq read
// to another; guarded, it loses the race when the cursor moved meanwhile.
func Advance(name string, from, to int64, now time.Time) store.Statement {
	return store.Stmt(`UPDATE event_cursors SET seq = ?, updated_at = ? WHERE name = ? AND seq = ?`, to, now.UnixMilli(), name, from)
}

// Lag is how many events are after the cursor of the consumer name and
// how old the first of them is at now (0 when there is none).
func Lag(ctx context.Context, s store.Store, name string, now time.Time) (events int64, age time.Duration, err error) {
	cur, err := Cursor(ctx, s, name, now)
	if err != nil {
		return 0, 0, err
	}
	head, err := event.LastSeq(ctx, s)
	if err != nil {
		return 0, 0, err
	}
	next, err := event.List(ctx, s, event.Filter{AfterSeq: cur, Limit: 1})
	if err != nil {
		return 0, 0, err
	}
	if len(next) == 1 {
		age = max(now.Sub(next[0].OccurredAt), 0)
	}
	return max(head-cur, 0), age, nil
}
