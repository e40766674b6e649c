package flow

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports flows by status and waiting reason, and the flows that
// need attention, read at scrape time, so that a dashboard shows who needs a
// human.
type Collector struct {
	flows     *Service
	desc      *prometheus.Desc
	attention *prometheus.Desc
}

// NewCollector returns a collector of ballet_flows{status,waiting} and
// ballet_flows_attention{attention}.
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
func NewCollector(s *Service) *Collector {
	return &Collector{flows: s,
		desc: prometheus.NewDesc("ballet_flows", "Flows by status and what they wait for.", []string{"status", "waiting"}, nil),
		attention: prometheus.NewDesc("ballet_flows_attention", "Flows that need attention now, by what they need (no_runner: no runner leased "+
			"their run within [runs] unclaimed_after).", []string{"attention"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.attention }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.flows.Store.Query(ctx, `SELECT status, COALESCE(waiting, ''), COUNT(*) FROM flows GROUP BY status, waiting`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
	} else {
		for i := range rows.Len() {
			var status, waiting string
			var n int64
			if err := rows.Scan(i, &status, &waiting, &n); err != nil {
				ch <- prometheus.NewInvalidMetric(c.desc, err)
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), status, waiting)
		}
	}
	n, err := c.flows.countNoRunner(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.attention, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.attention, prometheus.GaugeValue, float64(n), AttentionNoRunner)
}
