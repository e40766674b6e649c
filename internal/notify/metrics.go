package notify

import (
	"context"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/store"
)

// NewLagCollector returns the notifier's lag collector:
// ballet_notify_lag_events (events after its cursor) and
// ballet_notify_lag_seconds (the age of the oldest of them; 0 when it is
// caught up).
func NewLagCollector(s store.Store, c clock.Clock) *consumer.LagCollector {
	return consumer.NewLagCollector(s, c, Cursor, "ballet_notify", "the notifier")
}

// Lag is how many events are after the notifier's cursor and how old the
// first of them is at now (0 when there is none).
func Lag(ctx context.Context, s store.Store, now time.Time) (events int64, age time.Duration, err error) {
	return consumer.Lag(ctx, s, Cursor, now)
}
