package flow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// garbled answers the queries that contain fragment with a row that does
// not scan, and every other query from the real store.
type garbled struct {
	store.Store
	fragment string
}

func (g garbled) Query(ctx context.Context, sql string, args ...any) (*store.Rows, error) {
	if strings.Contains(sql, g.fragment) {
		return &store.Rows{Columns: []string{"a", "b", "c"}, Values: [][]any{{true, true, true}}}, nil
	}
	return g.Store.Query(ctx, sql, args...)
}

// TestUnreadableRowsAreErrors: a row that cannot be read is an error that
// says so — the kill switch's job retries (it is not made dead for a flow
// "" not found), and a scrape of ballet_flows fails (a row is not skipped
// as if it were not there).
func TestUnreadableRowsAreErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		g := garbled{Store: s, fragment: `SELECT id FROM flows WHERE status = 'running' AND waiting = 'run'`}
		svc := &flow.Service{Store: g, Clock: clock.Real{}, Applier: &transition.Applier{Store: s, Clock: clock.Real{}}}
		reg := registry{}
		svc.Register(reg)
		err := reg[flow.JobKill](context.Background(), &job.Job{Kind: flow.JobKill, Payload: []byte(`{}`), Attempt: 1, MaxAttempts: 20})
		if err == nil || job.IsPermanent(err) || !strings.Contains(err.Error(), "list running stages") {
			t.Fatalf("kill switch over an unreadable row: %v", err)
		}

		metrics := prometheus.NewRegistry()
		metrics.MustRegister(flow.NewCollector(&flow.Service{Store: garbled{Store: s, fragment: `GROUP BY status, waiting`}, Clock: clock.Real{}}))
		if mfs, err := metrics.Gather(); err == nil {
			t.Fatalf("an unreadable row was gathered as %v", mfs)
		}
	})
}
