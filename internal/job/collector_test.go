package job_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
)

// garbled answers every query with a row that does not scan.
type garbled struct{ store.Store }

func (garbled) Query(context.Context, string, ...any) (*store.Rows, error) {
	return &store.Rows{Columns: []string{"status", "n"}, Values: [][]any{{"pending", "many"}}}, nil
}

// TestQueueCollectorReportsUnreadableRows: a row that cannot be read makes
// the scrape fail; it is not reported as a count of 0.
func TestQueueCollectorReportsUnreadableRows(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(job.NewQueueCollector(garbled{}))
	if mfs, err := reg.Gather(); err == nil {
		t.Fatalf("an unreadable row was gathered as %v", mfs)
	}
}
