package run

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/transition"
)

// Collector exports runs by status and runners by liveness, read at scrape
// time: ballet_runs{status} and ballet_runners{alive} (alive: a heartbeat
// within [runs] grace).
//
// Each package declares its own metrics (names, help, labels) in the
// Prometheus client's one shape; what looks alike across packages' metrics
// files is that shape, not shared logic, so it is not factored out.
type Collector struct {
	s       *Service
	runs    *prometheus.Desc
	runners *prometheus.Desc
}

// NewCollector returns the collector of s's runs and runners.
func NewCollector(s *Service) *Collector {
	return &Collector{s: s,
		runs:    prometheus.NewDesc("ballet_runs", "Runs (agent sessions) by status.", []string{"status"}, nil),
		runners: prometheus.NewDesc("ballet_runners", "Registered runners by liveness (alive: a heartbeat within [runs] grace).", []string{"alive"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.runs; ch <- c.runners }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[string]float64{StatusQueued: 0, StatusRunning: 0, StatusSucceeded: 0, StatusFailed: 0, StatusCancelled: 0}
	rows, err := c.s.store.Query(ctx, `SELECT status, COUNT(*) FROM runs GROUP BY status`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.runs, err)
	} else {
		for i := range rows.Len() {
			var status string
			var n int64
			if err := rows.Scan(i, &status, &n); err != nil {
				ch <- prometheus.NewInvalidMetric(c.runs, err)
				return
			}
			counts[status] = float64(n)
		}
		for status, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, n, status)
		}
	}
	cutoff := c.s.now().Add(-c.s.cfg.Grace).UnixMilli()
	rows, err = c.s.store.Query(ctx, `SELECT COALESCE(SUM(last_seen_at >= ?), 0), COUNT(*) FROM runners`, cutoff)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.runners, err)
		return
	}
	var alive, all int64
	if err := rows.Scan(0, &alive, &all); err != nil {
		ch <- prometheus.NewInvalidMetric(c.runners, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.runners, prometheus.GaugeValue, float64(alive), "true")
	ch <- prometheus.MustNewConstMetric(c.runners, prometheus.GaugeValue, float64(all-alive), "false")
}

// SpendMetric registers ballet_run_cost_usd_total{project} on reg and
// returns the subscriber (transition.Subscriber) that counts into it the
// cost each committed run.finished reports.
func SpendMetric(reg prometheus.Registerer) transition.Subscriber {
	spend := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ballet_run_cost_usd_total",
		Help: "Agent spend reported by finished runs, by project."}, []string{"project"})
	reg.MustRegister(spend)
	return func(c transition.Committed) {
		for _, e := range c.Events {
			if e.Type != "run.finished" {
				continue
			}
			var p RunFinished
			if json.Unmarshal(e.Payload, &p) == nil && p.Usage.CostUSD > 0 {
				spend.WithLabelValues(e.ProjectID).Add(p.Usage.CostUSD)
			}
		}
	}
}
