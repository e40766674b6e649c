package job_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
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

// TestQueueCollectorCountsEachStatus: ballet_jobs{status} is the number of
// jobs in each status, 0 for a status no job has.
func TestQueueCollectorCountsEachStatus(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		var batch []store.Statement
		for i, status := range []string{job.StatusPending, job.StatusDone, job.StatusDone, job.StatusDead} {
			st, err := job.Spec{Kind: "k"}.Insert(fmt.Sprint("j", i), now)
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, st, store.Stmt(`UPDATE jobs SET status = ? WHERE id = ?`, status, fmt.Sprint("j", i)))
		}
		if _, err := s.Exec(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(job.NewQueueCollector(s))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		want := map[string]float64{job.StatusPending: 1, job.StatusRunning: 0, job.StatusDone: 2, job.StatusDead: 1}
		if !maps.Equal(got, want) {
			t.Fatalf("ballet_jobs = %v, want %v", got, want)
		}
	})
}
