package job

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the orchestrator's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	total    *prometheus.CounterVec
	running  prometheus.Gauge
	duration *prometheus.HistogramVec
	wakes    prometheus.Counter
}

// NewMetrics registers the job metrics with reg.
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ballet_jobs_total",
			Help: "Jobs finished by kind and result (done, retry, dead; lost when a re-claimed job's late result was discarded; abandoned when leadership was lost).",
		}, []string{"kind", "result"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ballet_jobs_running",
			Help: "Job handlers running in this instance.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ballet_job_duration_seconds",
			Help:    "Time a job handler ran.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"kind"}),
		wakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ballet_jobs_woken_total",
			Help: "Pending jobs made due at once (Orchestrator.Wake: a forge's webhook woke a merge check).",
		}),
	}
	reg.MustRegister(m.total, m.running, m.duration, m.wakes)
	return m
}

func (m *Metrics) count(kind, result string) {
	if m != nil {
		m.total.WithLabelValues(kind, result).Inc()
	}
}

func (m *Metrics) setRunning(n int) {
	if m != nil {
		m.running.Set(float64(n))
	}
}

func (m *Metrics) observe(kind string, d time.Duration) {
	if m != nil {
		m.duration.WithLabelValues(kind).Observe(d.Seconds())
	}
}

func (m *Metrics) woken(n int) {
	if m != nil {
		m.wakes.Add(float64(n))
	}
}
