package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/store"
)

// NewLagCollector returns the dispatcher's lag collector:
// ballet_webhooks_lag_events (events after its cursor) and
// ballet_webhooks_lag_seconds (the age of the oldest of them).
func NewLagCollector(s store.Store, c clock.Clock) *consumer.LagCollector {
	return consumer.NewLagCollector(s, c, Cursor, "ballet_webhooks", "the webhook dispatcher")
}

// Metrics counts delivery attempts by outcome.
type Metrics struct {
	attempts *prometheus.CounterVec
}

// NewMetrics registers ballet_webhook_attempts_total{outcome}: outcome
// succeeded, failed (to be retried), gave_up (the hook was disabled) or
// skipped (an inactive hook).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ballet_webhook_attempts_total",
		Help: "Webhook delivery attempts, by outcome: succeeded, failed (retried), gave_up (the hook was disabled), skipped."}, []string{"outcome"})}
	reg.MustRegister(m.attempts)
	return m
}

// count records an attempt's outcome (nil: not counted).
func (m *Metrics) count(outcome string) {
	if m != nil {
		m.attempts.WithLabelValues(outcome).Inc()
	}
}
