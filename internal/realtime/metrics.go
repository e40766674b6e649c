package realtime

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts realtime connections and their keep-alive pings.
type Metrics struct {
	conns prometheus.Gauge
	pings *prometheus.CounterVec
}

// NewMetrics registers the realtime metrics on reg.
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ballet_realtime_connections",
			Help: "Open realtime WebSocket connections.",
		}),
		pings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ballet_realtime_pings_total",
			Help: "Keep-alive pings by result: answered, or unanswered (the client was dropped).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.conns, m.pings)
	return m
}

func (m *Metrics) opened() {
	if m != nil {
		m.conns.Inc()
	}
}

func (m *Metrics) closed() {
	if m != nil {
		m.conns.Dec()
	}
}

func (m *Metrics) pinged(answered bool) {
	if m != nil {
		result := "unanswered"
		if answered {
			result = "answered"
		}
		m.pings.WithLabelValues(result).Inc()
	}
}
