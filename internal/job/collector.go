package job

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/store"
)

// QueueCollector exports how many jobs are in each status, read at scrape
// time.
type QueueCollector struct {
	store store.Store
	desc  *prometheus.Desc
}

// NewQueueCollector returns a collector of ballet_jobs{status}.
func NewQueueCollector(s store.Store) *QueueCollector {
	return &QueueCollector{store: s, desc: prometheus.NewDesc("ballet_jobs", "Jobs in the queue by status.", []string{"status"}, nil)}
}

// Describe implements prometheus.Collector.
func (q *QueueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

// Collect implements prometheus.Collector.
func (q *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[string]float64{StatusPending: 0, StatusRunning: 0, StatusDone: 0, StatusDead: 0}
	rows, err := q.store.Query(ctx, `SELECT status, COUNT(*) FROM jobs GROUP BY status`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(q.desc, err)
		return
	}
	for i := range rows.Len() {
		var status string
		var n int64
		if err := rows.Scan(i, &status, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(q.desc, err) // not a count of 0
			return
		}
		counts[status] = float64(n)
	}
	for status, n := range counts {
		ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, n, status)
	}
}
