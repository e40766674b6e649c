package job_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestReads: Free tells which keys no pending or running job holds (done
// and dead jobs free their key); Last finds the job of a key that
// counts (the pending or running one, else the newest).
func TestReads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		insert := func(id, key, status string, at time.Time, payload any) {
			t.Helper()
			st, err := job.Spec{Kind: "k", Payload: payload, DedupeKey: key}.Insert(id, at)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Exec(ctx, st, store.Stmt(`UPDATE jobs SET status = ?, last_error = ? WHERE id = ?`, status, "boom "+id, id)); err != nil {
				t.Fatal(err)
			}
		}
		var keys []string
		for i := range 1203 {
			key := fmt.Sprintf("key-%d", i)
			keys = append(keys, key)
			switch i % 3 {
			case 0:
				insert(fmt.Sprintf("p%d", i), key, job.StatusPending, now, nil)
			case 1:
				insert(fmt.Sprintf("d%d", i), key, job.StatusDone, now, nil)
			}
		}
		insert("r", "running", job.StatusRunning, now, nil)
		free, err := job.Free(ctx, s, append(keys, "running", "never")...)
		if err != nil {
			t.Fatal(err)
		}
		isFree := map[string]bool{}
		for _, k := range free {
			isFree[k] = true
		}
		if len(free) != 803 || isFree["key-0"] || isFree["key-1200"] || !isFree["key-1"] || !isFree["key-2"] || isFree["running"] || !isFree["never"] {
			t.Fatalf("free: %d keys: %v", len(free), free[:min(len(free), 10)])
		}
		if got, err := job.Free(ctx, s); err != nil || len(got) != 0 {
			t.Fatalf("no keys: %v %v", got, err)
		}
		if got, err := job.Free(ctx, s, `a "quoted" \ key`); err != nil || len(got) != 1 || got[0] != `a "quoted" \ key` {
			t.Fatalf("a key that needs escaping in JSON: %q %v", got, err)
		}

		insert("old", "last", job.StatusDead, now, map[string]any{"n": 1})
		insert("new", "last", job.StatusDone, now.Add(time.Second), map[string]any{"n": 2})
		if _, err := s.Exec(ctx, store.Stmt(`UPDATE jobs SET failures = 3 WHERE id = 'new'`)); err != nil {
			t.Fatal(err)
		}
		r, ok, err := job.Last(ctx, s, "last")
		if err != nil || !ok || r.Status != job.StatusDone || r.LastError != "boom new" || r.Failures != 3 || !r.CreatedAt.Equal(now.Add(time.Second)) || r.Kind != "k" {
			t.Fatalf("last of a key without a pending job: %+v %v %v", r, ok, err)
		}
		var p struct{ N int }
		if err := json.Unmarshal(r.Payload, &p); err != nil || p.N != 2 {
			t.Fatalf("payload %s: %v", r.Payload, err)
		}
		insert("again", "last", job.StatusPending, now.Add(-time.Hour), map[string]any{"n": 3})
		if r, ok, err := job.Last(ctx, s, "last"); err != nil || !ok || r.Status != job.StatusPending {
			t.Fatalf("last of a key with a pending job: %+v %v %v", r, ok, err)
		}
		if _, ok, err := job.Last(ctx, s, "never"); err != nil || ok {
			t.Fatalf("last of a key never queued: %v %v", ok, err)
		}
	})
}

// TestReadsUseIndexes keeps the reads cheap (the reconciler runs them on
// every pass): on SQLite, they scan no table.
func TestReadsUseIndexes(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	for _, name := range slices.Sorted(maps.Keys(job.Reads)) {
		storetest.NoTableScan(t, s, name, job.Reads[name].SQL, job.Reads[name].Args...)
	}
}

// TestInsertWhileAndRetire: InsertWhile enqueues only while its condition
// holds (and not over a pending job of the key); Retire marks the pending
// job of a key done, and leaves a running one alone.
func TestInsertWhileAndRetire(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		exec := func(st store.Statement) int64 {
			t.Helper()
			res, err := s.Exec(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			return res[0].RowsAffected
		}
		status := func(id string) string {
			t.Helper()
			rows, err := s.Query(ctx, `SELECT status FROM jobs WHERE id = ?`, id)
			if err != nil || rows.Len() != 1 {
				t.Fatalf("job %s: %v", id, err)
			}
			var st string
			if err := rows.Scan(0, &st); err != nil {
				t.Fatal(err)
			}
			return st
		}
		spec := job.New(widgetArgs{ID: "w1"})
		no, err := spec.InsertWhile("j0", now, store.Stmt(`1 = ?`, 2))
		if err != nil {
			t.Fatal(err)
		}
		if n := exec(no); n != 0 {
			t.Fatalf("inserted %d jobs while the condition failed", n)
		}
		yes, err := spec.InsertWhile("j1", now, store.Stmt(`1 = ?`, 1))
		if err != nil {
			t.Fatal(err)
		}
		if n := exec(yes); n != 1 || status("j1") != job.StatusPending {
			t.Fatalf("inserted %d jobs while the condition held", n)
		}
		again, _ := spec.InsertWhile("j2", now, store.Stmt(`1 = ?`, 1))
		if n := exec(again); n != 0 {
			t.Fatalf("inserted %d jobs over a pending one of the key", n)
		}
		if n := exec(job.Retire(widgetArgs{ID: "w1"}, now)); n != 1 || status("j1") != job.StatusDone {
			t.Fatalf("retired %d jobs: %s", n, status("j1"))
		}
		running, err := spec.Insert("j3", now)
		if err != nil {
			t.Fatal(err)
		}
		exec(running)
		exec(store.Stmt(`UPDATE jobs SET status = 'running', attempt = 1 WHERE id = 'j3'`))
		if n := exec(job.Retire(widgetArgs{ID: "w1"}, now)); n != 0 || status("j3") != job.StatusRunning {
			t.Fatalf("retired %d jobs: a running one is %s", n, status("j3"))
		}
	})
}
