package retention

import (
	"context"
	"errors"
	"time"

	"github.com/ballet/ballet/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are retention's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	deletedRows *prometheus.CounterVec
}

// NewMetrics registers ballet_retention_deleted_total with reg, every
// kind showing at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{deletedRows: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ballet_retention_deleted_total",
		Help: "Rows deleted by retention, by kind (run_logs: log chunks; jobs, sessions, notifications, runners).",
	}, []string{"kind"})}
	for _, k := range Kinds {
		m.deletedRows.WithLabelValues(k)
	}
	reg.MustRegister(m.deletedRows)
	return m
}

func (m *Metrics) deleted(kind string, n int) {
	if m != nil {
		m.deletedRows.WithLabelValues(kind).Add(float64(n))
	}
}

// SizeCollector is ballet_db_size_bytes and ballet_db_free_bytes: the
// size of Core's database as SQLite counts it (page_count × page_size) and
// the part of it free for reuse (freelist_count × page_size: what deletes
// freed and new writes fill before the file grows), read at every scrape.
// On rqlite it is the database of the node that answers the read (the
// leader at the weak read level).
type SizeCollector struct {
	store      store.Store
	size, free *prometheus.Desc
}

// NewSizeCollector returns the collector of s's size.
func NewSizeCollector(s store.Store) *SizeCollector {
	return &SizeCollector{store: s,
		size: prometheus.NewDesc("ballet_db_size_bytes",
			"Size of Core's database in bytes (SQLite's page_count × page_size; on rqlite the answering node's).", nil, nil),
		free: prometheus.NewDesc("ballet_db_free_bytes",
			"Bytes of Core's database free for reuse (SQLite's freelist_count × page_size): deleted data whose pages new writes fill first.", nil, nil)}
}

// Describe implements prometheus.Collector.
func (c *SizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.size; ch <- c.free }

// Collect implements prometheus.Collector.
func (c *SizeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, free, err := Size(ctx, c.store)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.size, err)
		ch <- prometheus.NewInvalidMetric(c.free, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(free))
}

// Size returns the size of s's database in bytes (page_count × page_size)
// and how much of it is free for reuse (freelist_count × page_size).
func Size(ctx context.Context, s store.Store) (size, free int64, err error) {
	rows, err := s.Query(ctx, `SELECT c.page_count * s.page_size, f.freelist_count * s.page_size
FROM pragma_page_count() c, pragma_page_size() s, pragma_freelist_count() f`)
	if err != nil {
		return 0, 0, err
	}
	if rows.Len() != 1 {
		return 0, 0, errNoSize
	}
	if err := rows.Scan(0, &size, &free); err != nil {
		return 0, 0, err
	}
	return size, free, nil
}

// errNoSize is the size collector's error for an answer without a number.
var errNoSize = errors.New("the database size query answered no row")
