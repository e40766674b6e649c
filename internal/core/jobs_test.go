package core_test

import (
	"context"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestJobsRunAsOftenAsConfigured: [jobs] max_attempts reaches every job
// Core enqueues (here a flow's first step, written by a ticket's start),
// instead of the built-in 20.
func TestJobsRunAsOftenAsConfigured(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.Jobs.MaxAttempts = 3 })
		e.Org("acme")
		e.Project("acme", "ACME")
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t",
			"acceptance_criteria": "it works", "state": "ready"}).JSON(t, &it)
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
		rows, err := s.Query(context.Background(), `SELECT kind, max_attempts FROM jobs`)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Len() == 0 {
			t.Fatal("starting a flow enqueued no job")
		}
		for i := range rows.Len() {
			var kind string
			var n int
			if err := rows.Scan(i, &kind, &n); err != nil {
				t.Fatal(err)
			}
			if n != 3 {
				t.Errorf("job %s may run %d times, want 3 ([jobs] max_attempts)", kind, n)
			}
		}
	})
}
