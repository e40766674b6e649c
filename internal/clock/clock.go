// Package clock abstracts time so that every loop in Ballet can run on a
// fake clock in tests. Components take a Clock as a field; production code
// uses Real, tests use Fake.
package clock

import (
	"context"
	"time"
)

// Clock is what components need from time.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of time.Timer that components use.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Sleep waits d on c: nil once d has passed, ctx's error when ctx ends
// first. It is the one interruptible sleep of every loop.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Real is the wall clock. Times are returned in UTC.
type Real struct{}

// Now returns the current UTC time.
func (Real) Now() time.Time { return time.Now().UTC() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Waker wakes a loop that runs on a timer and on demand (the scheduler,
// the job orchestrator, the notifier): Nudge asks for a run at once, and
// nudges that come while the loop is busy coalesce into one. Its zero
// value is not usable; NewWaker makes one.
type Waker struct{ c chan struct{} }

// NewWaker returns a Waker with no nudge pending.
func NewWaker() *Waker { return &Waker{c: make(chan struct{}, 1)} }

// Nudge asks for a run at once; it never blocks.
func (w *Waker) Nudge() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Wait waits until a nudge or until d has passed on c, and reports true;
// it reports false when ctx ends first.
func (w *Waker) Wait(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-w.c:
	case <-t.C():
	}
	return true
}
