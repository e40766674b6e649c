package schedule

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	starts prometheus.Counter
	pass   prometheus.Histogram
}

// NewMetrics registers the scheduler metrics with reg.
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ballet_scheduler_starts_total",
			Help: "Tickets whose pipeline the scheduler started.",
		}),
		pass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ballet_scheduler_pass_seconds",
			Help:    "Time a scheduler pass took (reading the runnable tickets and starting them).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
	}
	reg.MustRegister(m.starts, m.pass)
	return m
}

func (m *Metrics) started() {
	if m != nil {
		m.starts.Inc()
	}
}

func (m *Metrics) observePass(d time.Duration) {
	if m != nil {
		m.pass.Observe(d.Seconds())
	}
}
