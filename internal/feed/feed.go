// Package feed is Core's event feed (spec data.md "Event log"): one tailer
// per Core instance reads new events from the log by seq every Interval (and
// at once when Nudge reports a local commit) and fans them out to
// subscriptions. Because seq order is commit order, a tailer that has read up
// to seq N has seen every event up to N, whichever instance wrote it.
//
// Fan-out never blocks: every subscription has a bounded buffer; one whose
// buffer overflows is dropped (Lagged is closed, then C) and its consumer
// must resume from the last seq it processed.
//
// Handoff from a database replay to live delivery: Subscribe registers the
// subscription and records the feed's position P atomically with respect to
// fan-out, so every event with seq > P reaches C and every event with
// seq ≤ P is already committed and readable. A consumer replays (after, P]
// from the log, then takes live events, dropping any seq it has passed.
package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/transition"
)

// Config tunes a Feed. Zero fields take the defaults.
type Config struct {
	Interval time.Duration // how often the log is read (default 200ms)
	Buffer   int           // events buffered per subscription (default 1024)
	Batch    int           // events per read of the log (default 1000)
}

// Defaults.
const (
	DefaultInterval = 200 * time.Millisecond
	DefaultBuffer   = 1024
	DefaultBatch    = 1000
)

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Buffer <= 0 {
		c.Buffer = DefaultBuffer
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Batch > event.MaxLimit {
		c.Batch = event.MaxLimit
	}
	return c
}

// ErrNotRunning is returned by SubscribeContext when the feed has not
// started (Run was not called or has not read its start position yet).
var ErrNotRunning = errors.New("event feed is not running")

// Feed tails the event log and fans events out.
type Feed struct {
	store event.Querier
	clock clock.Clock
	log   *slog.Logger
	cfg   Config

	nudge   chan struct{}
	ready   chan struct{} // closed once Run has its start position
	started sync.Once

	mu   sync.Mutex
	last int64 // the feed's position: every event ≤ last has been fanned out
	subs map[*Subscription]struct{}
}

// New returns a feed over the store's event log; call Run to start it.
func New(store event.Querier, clk clock.Clock, log *slog.Logger, cfg Config) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{store: store, clock: clk, log: log, cfg: cfg.withDefaults(),
		nudge: make(chan struct{}, 1), ready: make(chan struct{}), subs: map[*Subscription]struct{}{}}
}

// Config returns the effective configuration.
func (f *Feed) Config() Config { return f.cfg }

// OnCommit is the feed's subscriber (transition.Subscriber): after a local
// commit the tailer reads the log at once, so local subscribers see the
// change within milliseconds.
func (f *Feed) OnCommit(transition.Committed) { f.Nudge() }

// Nudge makes the tailer read the log at once. It never blocks.
func (f *Feed) Nudge() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// Last returns the feed's position: the highest seq it has fanned out (or
// its start position).
func (f *Feed) Last() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Ready is closed once the feed has its start position and accepts
// subscriptions.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Run tails the log until ctx ends. It starts at the log's last seq. Run
// must be called once per Core instance (every instance, not only the
// leader).
func (f *Feed) Run(ctx context.Context) {
	for {
		last, err := event.LastSeq(ctx, f.store)
		if err == nil {
			f.mu.Lock()
			f.last = last
			f.mu.Unlock()
			break
		}
		if ctx.Err() != nil {
			return
		}
		f.log.Warn("event feed: cannot read the log's position; retrying", "err", err)
		if !f.sleep(ctx) {
			return
		}
	}
	f.started.Do(func() { close(f.ready) })
	defer f.closeAll()
	for {
		f.poll(ctx)
		if !f.sleep(ctx) {
			return
		}
	}
}

// sleep waits one interval or a nudge; false when ctx ended.
func (f *Feed) sleep(ctx context.Context) bool {
	t := f.clock.NewTimer(f.cfg.Interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
	case <-f.nudge:
	}
	return true
}

// poll reads every new event and fans it out.
func (f *Feed) poll(ctx context.Context) {
	for {
		evs, err := event.List(ctx, f.store, event.Filter{AfterSeq: f.Last(), Limit: f.cfg.Batch})
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("event feed: read failed; retrying next interval", "err", err)
			}
			return
		}
		if len(evs) > 0 {
			f.publish(evs)
		}
		if len(evs) < f.cfg.Batch {
			return
		}
	}
}

// publish fans events out in seq order, never blocking on a subscriber.
func (f *Feed) publish(evs []event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range evs {
		if e.Seq <= f.last {
			continue
		}
		for s := range f.subs {
			if s.filter != nil && !s.filter(e) {
				continue
			}
			select {
			case s.c <- e:
			default:
				f.dropLocked(s, true)
			}
		}
		f.last = e.Seq
	}
}

func (f *Feed) dropLocked(s *Subscription, lagged bool) {
	if _, ok := f.subs[s]; !ok {
		return
	}
	delete(f.subs, s)
	if lagged {
		close(s.lagged)
	}
	close(s.c)
}

func (f *Feed) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		f.dropLocked(s, false)
	}
}

// Subscription receives the events after its Start that pass its filter.
type Subscription struct {
	f      *Feed
	filter func(event.Event) bool
	c      chan event.Event
	lagged chan struct{}
	start  int64
}

// Subscribe registers a subscription; it waits for the feed to start.
// filter runs on the tailer while it fans out: keep it cheap (nil: every
// event).
func (f *Feed) Subscribe(filter func(event.Event) bool) *Subscription {
	s, _ := f.SubscribeContext(context.Background(), filter)
	return s
}

// SubscribeContext is Subscribe, giving up with ErrNotRunning when ctx ends
// before the feed has started.
func (f *Feed) SubscribeContext(ctx context.Context, filter func(event.Event) bool) (*Subscription, error) {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return nil, ErrNotRunning
	}
	s := &Subscription{f: f, filter: filter, c: make(chan event.Event, f.cfg.Buffer), lagged: make(chan struct{})}
	f.mu.Lock()
	s.start = f.last
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s, nil
}

// C delivers the events with seq > Start in seq order. It is closed when the
// subscription ends: after Close, when the feed stops, or when it lagged.
func (s *Subscription) C() <-chan event.Event { return s.c }

// Lagged is closed when the subscription's buffer overflowed: the
// subscription was dropped and its consumer must resume from the last seq
// it processed. Events already buffered in C are still valid.
func (s *Subscription) Lagged() <-chan struct{} { return s.lagged }

// Start is the feed's position when the subscription was registered: every
// event with a higher seq reaches C, every event up to it is in the log.
func (s *Subscription) Start() int64 { return s.start }

// Close ends the subscription (idempotent).
func (s *Subscription) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.dropLocked(s, false)
}

// Subscribers returns how many subscriptions are registered.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}
