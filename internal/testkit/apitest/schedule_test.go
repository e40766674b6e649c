package apitest_test

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestSchedulerReactsToEvents: with the periodic pass an hour away, only
// the events of committed changes can start tickets: the blocked ticket
// does not start at the scheduler's first pass; its blocker, made ready,
// starts on that change's event; the blocked one as soon as the blocker is
// done.
func TestSchedulerReactsToEvents(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		repo := apitest.NewGitRepo(t)
		dir := t.TempDir()
		e := apitest.New(t, s, func(c *config.Config) {
			c.Jobs.Poll.Duration = 20 * time.Millisecond
			c.Scheduler.Interval.Duration = time.Hour
			c.Storage.Path = dir + "/core.db"
		})
		e.Org("acme")
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
			"repository": map[string]any{"forge": "git", "url": repo.Bare}})
		e.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "work", "kind": "agent"}}}})
		var a, b struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "first"}).JSON(t, &a)
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "second", "state": "ready"}).JSON(t, &b)
		e.Admin(201, "POST", "/api/v1/items/"+b.Key+"/blockers/"+a.Key, nil)
		e.StartJobs()
		e.StartScheduler()
		apitest.Await(t, "the scheduler's first pass", func() bool { return schedulerPasses(t, e) >= 1 })
		e.Admin(404, "GET", "/api/v1/items/"+b.Key+"/flow", nil) // the pass did not start the blocked ticket
		runner := e.NewRunner("r")
		e.Admin(200, "PATCH", "/api/v1/items/"+a.Key, map[string]any{"version": 1, "state": "ready"})
		r := runner.MustLease()
		if r.Item != a.Key {
			t.Fatalf("leased %s, want %s", r.Item, a.Key)
		}
		runner.Complete(r, "done", "ok") // $done: A done, which unblocks B
		r = runner.MustLease()
		if r.Item != b.Key {
			t.Fatalf("leased %s, want %s", r.Item, b.Key)
		}
	})
}

// schedulerPasses is how many passes Core's scheduler has finished.
func schedulerPasses(t *testing.T, e *apitest.Env) uint64 {
	t.Helper()
	mfs, err := e.Core.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ballet_scheduler_pass_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}
