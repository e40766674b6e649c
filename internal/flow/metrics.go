package flow

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/store"
)

// Collector exports flows by status and waiting reason, read at scrape
// time, so that a dashboard shows who needs a human.
type Collector struct {
	store store.Store
	desc  *prometheus.Desc
}

// NewCollector returns a collector of ballet_flows{status,waiting}.
func NewCollector(s store.Store) *Collector {
	return &Collector{store: s, desc: prometheus.NewDesc("ballet_flows", "Flows by status and what they wait for.", []string{"status", "waiting"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.store.Query(ctx, `SELECT status, COALESCE(waiting, ''), COUNT(*) FROM flows GROUP BY status, waiting`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for i := range rows.Len() {
		var status, waiting string
		var n int64
		if rows.Scan(i, &status, &waiting, &n) == nil {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), status, waiting)
		}
	}
}
