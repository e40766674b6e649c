package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestWholeCoreRetention runs a whole Core on a fake clock: a run ends
// with a log, which reads as before; 31 fake days later the leader's
// retention sweep (a durable job, queued every [retention] interval) has
// deleted the log — GET /runs/{run}/log answers 410 naming the retention
// — and removed the runners gone since, with /metrics counting both.
func TestWholeCoreRetention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
		repo := apitest.NewGitRepo(t)
		dir := t.TempDir()
		e := apitest.RunOn(t, s, fk, func(c *config.Config) {
			c.Storage.Path = dir + "/core.db"
			c.Leader.TTL.Duration, c.Leader.Renew.Duration = 1000*time.Hour, 100*time.Hour
		})
		e.Org("acme")
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
			"repository": map[string]any{"forge": "git", "url": repo.Bare, "default_branch": "main"}})
		runner := e.NewRunner("r1")
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "work",
			"acceptance_criteria": "it works", "state": "ready"})
		leased := runner.MustLease()
		if r := e.Raw(runner.Token, "POST", "/api/v1/runs/"+leased.ID+"/log?offset=0", "application/octet-stream", []byte("the session said\n")); r.Status != 200 {
			t.Fatalf("upload the log: %d %s", r.Status, r.Body)
		}
		runner.Complete(leased, "done", "did it")
		logPath := "/api/v1/runs/" + leased.ID + "/log"
		if r := e.Admin(200, "GET", logPath, nil); !strings.Contains(string(r.Body), "the session said") {
			t.Fatalf("the log: %s", r.Body)
		}

		fk.Advance(31 * 24 * time.Hour)
		apitest.Await(t, "the sweep removed the runner", func() bool {
			var list struct{ Runners []struct{ Name string } }
			e.Admin(200, "GET", "/api/v1/runners", nil).JSON(t, &list)
			return len(list.Runners) == 0
		})
		apitest.Await(t, "the sweep deleted the log", func() bool {
			m := string(e.Do("", "GET", "/metrics", nil).Body)
			return strings.Contains(m, `ballet_retention_deleted_total{kind="run_logs"} 1`) &&
				strings.Contains(m, `ballet_retention_deleted_total{kind="runners"} 1`)
		})
		r := e.Do(apitest.BootstrapToken, "GET", logPath, nil)
		if r.Status != 410 || !strings.Contains(string(r.Body), `"code":"gone"`) || !strings.Contains(string(r.Body), "[retention] run_logs") {
			t.Fatalf("the deleted log: %d %s", r.Status, r.Body)
		}
		if m := string(e.Do("", "GET", "/metrics", nil).Body); !strings.Contains(m, "ballet_db_size_bytes ") {
			t.Fatalf("/metrics has no ballet_db_size_bytes")
		}
	})
}
