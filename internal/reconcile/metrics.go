package reconcile

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reconciler's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	repairs *prometheus.CounterVec
	pass    prometheus.Histogram
}

// NewMetrics registers the reconciler metrics with reg.
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ballet_reconciler_repairs_total",
			Help: "Repairs made by the reconciler, by rule (stopped, stalled, requeued, dead, orphaned, released).",
		}, []string{"rule"}),
		pass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ballet_reconciler_pass_seconds",
			Help:    "Time a reconciler pass took (finding what is wrong and repairing it).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
	}
	for _, rule := range Rules {
		m.repairs.WithLabelValues(rule) // every rule shows, at 0
	}
	reg.MustRegister(m.repairs, m.pass)
	return m
}

func (m *Metrics) repaired(rule string) {
	if m != nil {
		m.repairs.WithLabelValues(rule).Inc()
	}
}

func (m *Metrics) observePass(d time.Duration) {
	if m != nil {
		m.pass.Observe(d.Seconds())
	}
}
