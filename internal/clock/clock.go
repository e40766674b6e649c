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
