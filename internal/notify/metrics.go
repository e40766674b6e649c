package notify

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
)

// LagCollector exports how far the notifier is behind the event log, read
// at scrape time: ballet_notify_lag_events (events after its cursor) and
// ballet_notify_lag_seconds (the age of the oldest of them; 0 when it is
// caught up).
type LagCollector struct {
	store          store.Store
	clock          clock.Clock
	events, second *prometheus.Desc
}

// NewLagCollector returns the notifier's lag collector.
func NewLagCollector(s store.Store, c clock.Clock) *LagCollector {
	return &LagCollector{store: s, clock: c,
		events: prometheus.NewDesc("ballet_notify_lag_events", "Events the notifier has not processed yet.", nil, nil),
		second: prometheus.NewDesc("ballet_notify_lag_seconds", "Age of the oldest event the notifier has not processed yet (0: caught up).", nil, nil)}
}

// Describe implements prometheus.Collector.
func (l *LagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- l.events; ch <- l.second }

// Collect implements prometheus.Collector.
func (l *LagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	events, age, err := Lag(ctx, l.store, l.clock.Now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(l.events, err)
		ch <- prometheus.NewInvalidMetric(l.second, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(l.events, prometheus.GaugeValue, float64(events))
	ch <- prometheus.MustNewConstMetric(l.second, prometheus.GaugeValue, age.Seconds())
}

// Lag is how many events are after the notifier's cursor and how old the
// first of them is at now (0 when there is none).
func Lag(ctx context.Context, s store.Store, now time.Time) (events int64, age time.Duration, err error) {
	cur, err := ReadCursor(ctx, s)
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
