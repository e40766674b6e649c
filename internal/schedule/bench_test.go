package schedule_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/schedule"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// seed writes 10 projects of 1,000 items each. In every block of ten items
// (numbers n0 … n0+9): n0 is an epic (ready or in progress); n0+1 … n0+4
// are done (each with a done flow); n0+5 backlog; n0+6 cancelled; n0+7 in
// progress (a running flow); n0+8 and n0+9 are ready tickets of the block's
// epic. n0+8 is blocked by n0+5 (open), and the epic by n0+5 too: all 2,000
// ready tickets are blocked, 1,000 of them only through their epic.
func seed(tb testing.TB, s store.Store) {
	ctx := context.Background()
	var batch []store.Statement
	flush := func() {
		if _, err := s.Exec(ctx, batch...); err != nil {
			tb.Fatal(err)
		}
		batch = batch[:0]
	}
	add := func(sql string, args ...any) {
		batch = append(batch, store.Stmt(sql, args...))
		if len(batch) == 500 {
			flush()
		}
	}
	var blockers [][2]string
	add(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES ('org', 'acme', 'Acme', 0, 0, 1)`)
	for p := range 10 {
		pid, key := fmt.Sprintf("p%d", p), fmt.Sprintf("P%d", p)
		add(`INSERT INTO projects (id, organization_id, key, name, repo_forge, repo_url, repo_default_branch, merge_policy,
required_approvals, required_checks, concurrency_limit, ticket_types, paused, created_at, updated_at, version)
VALUES (?, 'org', ?, ?, 'git', '/srv/git/x.git', 'main', 'manual', 0, '[]', 0, '["task"]', 0, 0, 0, 1)`, pid, key, key)
		for n := 1; n <= 1000; n++ {
			id := fmt.Sprintf("%s-%d", pid, n)
			n0 := n - (n-1)%10
			epic := fmt.Sprintf("%s-%d", pid, n0)
			typ, state, epicID := "task", "", any(nil)
			switch (n - 1) % 10 {
			case 0:
				typ, state = "epic", []string{"ready", "in_progress"}[n%2]
			case 1, 2, 3, 4:
				state = "done"
			case 5:
				state = "backlog"
			case 6:
				state = "cancelled"
			case 7:
				state = "in_progress"
			case 8, 9:
				state, epicID = "ready", epic
			}
			add(`INSERT INTO items (id, organization_id, project_id, number, key, type, title, description, acceptance_criteria, epic_id,
state, created_by, created_at, updated_at, version) VALUES (?, 'org', ?, ?, ?, ?, 'title', '', '', ?, ?, 'alice', ?, ?, 1)`,
				id, pid, n, fmt.Sprintf("%s-%d", key, n), typ, epicID, state, int64(n*10+p), int64(n*10+p))
			fstatus := map[string]string{"done": "done", "in_progress": "running"}[state]
			if typ != "epic" && fstatus != "" {
				add(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration,
max_iterations, step, status, waiting, started_at, updated_at, version) VALUES (?, 'org', ?, ?, 'default', 0, '{}', 'implement', 1, 3, 1, ?, NULL, 0, 0, 1)`,
					"f-"+id, pid, id, fstatus)
			}
			if i := (n - 1) % 10; i == 0 || i == 8 {
				blockers = append(blockers, [2]string{id, fmt.Sprintf("%s-%d", pid, n0+5)})
			}
		}
	}
	for _, bl := range blockers { // after the items they name
		add(`INSERT INTO blockers (item_id, blocker_id, created_at) VALUES (?, ?, 0)`, bl[0], bl[1])
	}
	flush()
}

// BenchmarkPass measures a pass over 10,000 items on SQLite:
//
//   - blocked: 2,000 ready tickets, all blocked (half only through their
//     epic), no limits: the query checks every candidate and starts none;
//   - full: the blockers resolved, every project at its limit (100
//     running flows each): nothing to start;
//   - start10: every project has one free slot: the query returns 10
//     tickets (the starter is a no-op, so every iteration finds them again).
func BenchmarkPass(b *testing.B) {
	s := storetest.Open(b, "sqlite")
	seed(b, s)
	ctx := context.Background()
	exec := func(sql string) {
		if _, err := s.Exec(ctx, store.Stmt(sql)); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, want int) {
		started := 0
		sch := schedule.New(s, clock.Real{}, nil, schedule.StarterFunc(func(context.Context, event.Actor, string) (flow.Flow, error) {
			started++
			return flow.Flow{}, nil
		}), schedule.Config{})
		b.ResetTimer()
		for b.Loop() {
			started = 0
			if _, err := sch.Pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if started != want {
			b.Fatalf("a pass started %d, want %d", started, want)
		}
	}
	b.Run("blocked", func(b *testing.B) { run(b, 0) })
	exec(`UPDATE items SET state = 'done' WHERE state = 'backlog'`)
	exec(`UPDATE projects SET concurrency_limit = 100`)
	b.Run("full", func(b *testing.B) { run(b, 0) })
	exec(`UPDATE projects SET concurrency_limit = 101`)
	b.Run("start10", func(b *testing.B) { run(b, 10) })
}
