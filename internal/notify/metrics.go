package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/store"
)

// NewLagCollector returns the notifier's lag collector:
// ballet_notify_lag_events (events after its cursor) and
// ballet_notify_lag_seconds (the age of the oldest of them; 0 when it is
// caught up).
func NewLagCollector(s store.Store, c clock.Clock) *consumer.LagCollector {
	return consumer.NewLagCollector(s, c, Cursor, "ballet_notify", "the notifier")
}

// Lag is how many events are after the notifier's cursor and how old the
// first of them is at now (0 when there is none).
func Lag(ctx context.Context, s store.Store, now time.Time) (events int64, age time.Duration, err error) {
	return consumer.Lag(ctx, s, Cursor, now)
}

// MailMetrics counts the mail attempts by result
// (ballet_notify_mail_attempts_total{result}: sent, retrying, failed,
// skipped) and times the SMTP exchange (ballet_notify_mail_send_seconds).
// A nil *MailMetrics counts nothing.
type MailMetrics struct {
	attempts *prometheus.CounterVec
	send     prometheus.Histogram
}

// NewMailMetrics registers the mail metrics with reg.
func NewMailMetrics(reg prometheus.Registerer) *MailMetrics {
	m := &MailMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ballet_notify_mail_attempts_total",
			Help: "Mail delivery attempts by result: sent, retrying (failed, another follows), failed (given up), skipped (no longer allowed)."},
			[]string{"result"}),
		send: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ballet_notify_mail_send_seconds",
			Help: "Time of one SMTP exchange (connect, send, quit).", Buckets: prometheus.DefBuckets}),
	}
	reg.MustRegister(m.attempts, m.send)
	return m
}

func (m *MailMetrics) count(result string) {
	if m != nil {
		m.attempts.WithLabelValues(result).Inc()
	}
}

func (m *MailMetrics) observe(d time.Duration) {
	if m != nil {
		m.send.Observe(d.Seconds())
	}
}

// deliveryCollector exports ballet_notify_mail_failing: the deliveries
// whose last attempt failed (retrying or given up), read at scrape time.
type deliveryCollector struct{ store store.Store }

var failingDesc = prometheus.NewDesc("ballet_notify_mail_failing",
	"Mail deliveries whose last attempt failed, by status: retrying (another attempt follows) or failed (given up).", []string{"status"}, nil)

// NewMailFailingCollector returns the collector of ballet_notify_mail_failing.
func NewMailFailingCollector(s store.Store) prometheus.Collector { return &deliveryCollector{store: s} }

func (c *deliveryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }

func (c *deliveryCollector) Collect(ch chan<- prometheus.Metric) {
	if c.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a, err := ReadMailAttention(ctx, c.store)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(failingDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, float64(a.Retrying), DeliveryRetrying)
	ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, float64(a.Failed), DeliveryFailed)
}

// MailAttention is what platform admins see of failing mail (GET
// /api/v1/platform/mail): how many deliveries are retrying and how many
// were given up, and the latest failure.
type MailAttention struct {
	Pending  int64 `json:"pending"`  // not sent yet, no attempt failed
	Retrying int64 `json:"retrying"` // an attempt failed; another follows
	Failed   int64 `json:"failed"`   // given up
	Sent     int64 `json:"sent"`
	// Failing is true while a delivery is retrying: the SMTP server may be
	// down or refusing.
	Failing   bool       `json:"failing"`
	LastError *string    `json:"last_error"` // the latest failure's error (no secret in it)
	LastAt    *time.Time `json:"last_error_at"`
}

// ReadMailAttention counts the deliveries by status and reads the latest
// failure.
func ReadMailAttention(ctx context.Context, s store.Store) (MailAttention, error) {
	var a MailAttention
	rows, err := s.Query(ctx, `SELECT status, COUNT(*) FROM mail_deliveries GROUP BY status`)
	if err != nil {
		return a, fmt.Errorf("count mail deliveries: %w", err)
	}
	for i := range rows.Len() {
		var st string
		var n int64
		if err := rows.Scan(i, &st, &n); err != nil {
			return a, err
		}
		switch st {
		case DeliveryPending:
			a.Pending = n
		case DeliveryRetrying:
			a.Retrying = n
		case DeliveryFailed:
			a.Failed = n
		case DeliverySent:
			a.Sent = n
		}
	}
	a.Failing = a.Retrying > 0
	last, err := s.Query(ctx, `SELECT last_error, updated_at FROM mail_deliveries WHERE status IN ('retrying', 'failed')
ORDER BY updated_at DESC LIMIT 1`)
	if err != nil {
		return a, fmt.Errorf("read the latest mail failure: %w", err)
	}
	if last.Len() == 1 {
		var msg string
		var at int64
		if err := last.Scan(0, &msg, &at); err != nil {
			return a, err
		}
		t := store.Time(at)
		a.LastError, a.LastAt = &msg, &t
	}
	return a, nil
}
