package consumer

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
)

// LagCollector exports how far a consumer is behind the event log, read at
// scrape time: <prefix>_lag_events (events after its cursor) and
// <prefix>_lag_seconds (the age of the oldest of them; 0 when it is caught
// up).
type LagCollector struct {
	store          store.Store
	clock          clock.Clock
	name           string
	events, second *prometheus.Desc
}

// NewLagCollector returns the lag collector of the consumer name, its
// metrics named prefix_lag_events and prefix_lag_seconds; who names the
// consumer in their help ("the notifier").
func NewLagCollector(s store.Store, c clock.Clock, name, prefix, who string) *LagCollector {
	return &LagCollector{store: s, clock: c, name: name,
		events: prometheus.NewDesc(prefix+"_lag_events", "Events "+who+" has not processed yet.", nil, nil),
		second: prometheus.NewDesc(prefix+"_lag_seconds", "Age of the oldest event "+who+" has not processed yet (0: caught up).", nil, nil)}
}

// Describe implements prometheus.Collector.
func (l *LagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- l.events; ch <- l.second }

// Collect implements prometheus.Collector.
func (l *LagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	events, age, err := Lag(ctx, l.store, l.name, l.clock.Now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(l.events, err)
		ch <- prometheus.NewInvalidMetric(l.second, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(l.events, prometheus.GaugeValue, float64(events))
	ch <- prometheus.MustNewConstMetric(l.second, prometheus.GaugeValue, age.Seconds())
}
