package flow_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// registry collects the flow engine's handlers so the test can call them
// itself, as often and as concurrently as it likes.
type registry map[string]job.Handler

func (r registry) Handle(kind string, h job.Handler) { r[kind] = h }

// snapshot hashes everything a flow step may change.
func snapshot(t *testing.T, s store.Store) string {
	h := sha256.New()
	for _, q := range []string{
		`SELECT type, entity_type, entity_id, payload FROM events ORDER BY seq`,
		`SELECT id, stage, iteration, step, status, COALESCE(waiting, ''), COALESCE(run_id, ''), COALESCE(outcome, ''), version FROM flows ORDER BY id`,
		`SELECT id, step, status, cancel_requested, version FROM runs ORDER BY id`,
		`SELECT id, state, version FROM items ORDER BY id`,
		`SELECT id, COALESCE(answer, ''), version FROM questions ORDER BY id`,
		`SELECT kind, COALESCE(dedupe_key, ''), status FROM jobs WHERE status <> 'running' ORDER BY id`,
	} {
		rows, err := s.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(h, rows.Values)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func flowEvents(t *testing.T, s store.Store) int64 {
	rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM events WHERE entity_type = 'flow'`)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	_ = rows.Scan(0, &n)
	return n
}

// TestHandlersAreIdempotent runs every flow job three times at once and
// then once more: the burst applies the step exactly once (one flow event),
// and the repeat changes nothing at all.
func TestHandlersAreIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		repo := apitest.NewGitRepo(t)
		dir := t.TempDir()
		e := apitest.New(t, s, func(c *config.Config) { c.Storage.Path = dir + "/core.db" })
		reg := registry{}
		e.Core.Flows.Register(reg)
		e.Org("acme")
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
			"repository": map[string]any{"forge": "git", "url": repo.Bare}})
		e.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{
				map[string]any{"id": "triage", "kind": "human"},
				map[string]any{"id": "fix", "kind": "agent"},
				map[string]any{"id": "integrate", "kind": "platform", "action": "merge"},
			}}})
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "state": "ready"}).JSON(t, &it)
		runner := e.NewRunner("r")
		kinds := map[string]int{}

		// drain runs every due job (and, with kind set, that kind even if
		// not due yet): a burst of three, then once more.
		var drainKind string
		drain := func() {
			t.Helper()
			for {
				rows, err := s.Query(ctx, `SELECT id, kind, payload, max_attempts FROM jobs WHERE status = 'pending' AND (run_at <= ? OR kind = ?)
ORDER BY created_at, id LIMIT 1`, time.Now().UnixMilli(), drainKind)
				if err != nil {
					t.Fatal(err)
				}
				if rows.Len() == 0 {
					return
				}
				j := &job.Job{Attempt: 1}
				var payload string
				_ = rows.Scan(0, &j.ID, &j.Kind, &payload, &j.MaxAttempts)
				j.Payload = []byte(payload)
				h, ok := reg[j.Kind]
				if !ok {
					t.Fatalf("no handler for %s", j.Kind)
				}
				if _, err := s.Exec(ctx, store.Stmt(`UPDATE jobs SET status = 'running', attempt = 1 WHERE id = ?`, j.ID)); err != nil {
					t.Fatal(err)
				}
				before := flowEvents(t, s)
				var wg sync.WaitGroup
				errs := make([]error, 3)
				for i := range errs {
					wg.Add(1)
					go func() { defer wg.Done(); errs[i] = h(ctx, j) }()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil && !job.IsSnooze(err) {
						t.Fatalf("%s: %v", j.Kind, err)
					}
				}
				if n := flowEvents(t, s) - before; n != 1 {
					t.Fatalf("%s run three times at once recorded %d flow events, want 1", j.Kind, n)
				}
				snap := snapshot(t, s)
				if err := h(ctx, j); err != nil && !job.IsSnooze(err) {
					t.Fatalf("%s again: %v", j.Kind, err)
				}
				if snapshot(t, s) != snap {
					t.Fatalf("%s run again changed something", j.Kind)
				}
				kinds[j.Kind]++
				if _, err := s.Exec(ctx, store.Stmt(`UPDATE jobs SET status = 'done' WHERE id = ?`, j.ID)); err != nil {
					t.Fatal(err)
				}
			}
		}
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
		drain() // enter triage (human)
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/approve", map[string]any{"comment": "go"})
		drain() // enter fix (agent): one run
		r := runner.MustLease()
		runner.Ask(r, "which way?", true)
		runner.Complete(r, "done", "asked")
		drain() // run finished with a blocking question: wait for the answer
		var qs struct{ Questions []struct{ ID string } }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/questions", nil).JSON(t, &qs)
		e.Admin(200, "POST", "/api/v1/questions/"+qs.Questions[0].ID+"/answer", map[string]any{"answer": "left"})
		drain() // resume, enter fix again
		r = runner.MustLease()
		repo.PushBranch("ballet/" + it.Key)
		runner.Complete(r, "done", "fixed")
		drain() // run finished → enter integrate → merge check (waits for a human)
		var item struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key, nil).JSON(t, &item)
		e.Admin(200, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": item.Version, "state": "paused"})
		drain() // stop

		// A stage's timeout: a second ticket's run is still going when its
		// timeout job comes due.
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "slow", "state": "ready"}).JSON(t, &it)
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
		drain()
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/approve", nil)
		drain()
		r = runner.MustLease()
		// (The first ticket's timeout jobs are long moot: only this one counts.)
		if _, err := s.Exec(ctx, store.Stmt(`UPDATE jobs SET status = 'done' WHERE kind = 'flow.timeout' AND payload NOT LIKE ?`,
			"%"+stuckFlowID(t, e, it.Key)+"%")); err != nil {
			t.Fatal(err)
		}
		drainKind = "flow.timeout"
		drain()
		var stuck struct{ Status, Waiting string }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/flow", nil).JSON(t, &stuck)
		var hb struct{ Cancelled bool }
		e.Must(200, runner.Token, "POST", "/api/v1/runs/"+r.ID+"/heartbeat", nil).JSON(t, &hb)
		if stuck.Waiting != "answer" || !hb.Cancelled {
			t.Fatalf("after the timeout: flow %+v, run cancelled %v", stuck, hb.Cancelled)
		}
		rows, _ := s.Query(ctx, `SELECT COUNT(*) FROM events WHERE type = 'flow.stuck'`)
		var nStuck int64
		_ = rows.Scan(0, &nStuck)
		if nStuck != 1 {
			t.Fatalf("%d flow.stuck events", nStuck)
		}

		for _, k := range []string{"flow.enter", "flow.run_finished", "flow.resume", "flow.merge", "flow.stop", "flow.timeout"} {
			if kinds[k] == 0 {
				t.Errorf("no %s job was exercised: %v", k, kinds)
			}
		}
		rows, _ = s.Query(ctx, `SELECT COUNT(*) FROM runs`)
		var runs int64
		_ = rows.Scan(0, &runs)
		if runs != 3 {
			t.Fatalf("%d runs, want 3 (fix, fix again after the answer, the slow ticket's): a handler run three times created more", runs)
		}
	})
}

func stuckFlowID(t *testing.T, e *apitest.Env, key string) string {
	f, ok, err := e.Core.Flows.Latest(context.Background(), itemID(t, e, key))
	if err != nil || !ok {
		t.Fatalf("flow of %s: %v", key, err)
	}
	return f.ID
}

func itemID(t *testing.T, e *apitest.Env, key string) string {
	var it struct{ ID string }
	e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &it)
	return it.ID
}
