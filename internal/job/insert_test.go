package job_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestInsertFillsTheDefaults: a spec without a due time is due when it is
// inserted, one without max attempts gets DefaultMaxAttempts, no payload is
// {}, and a json.RawMessage payload is stored as it is.
func TestInsertFillsTheDefaults(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		for id, spec := range map[string]job.Spec{
			"bare": {Kind: "k"},
			"raw":  {Kind: "k", Payload: json.RawMessage(`{"b":2, "a":1}`), RunAt: now.Add(time.Hour), MaxAttempts: 3},
		} {
			st, err := spec.Insert(id, now)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Exec(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		for id, want := range map[string]struct {
			payload     string
			runAt       time.Time
			maxAttempts int
		}{
			"bare": {`{}`, now, job.DefaultMaxAttempts},
			"raw":  {`{"b":2, "a":1}`, now.Add(time.Hour), 3},
		} {
			rows, err := s.Query(ctx, `SELECT payload, run_at, max_attempts FROM jobs WHERE id = ?`, id)
			if err != nil || rows.Len() != 1 {
				t.Fatalf("job %s: %v", id, err)
			}
			var payload string
			var runAt int64
			var maxAttempts int
			if err := rows.Scan(0, &payload, &runAt, &maxAttempts); err != nil {
				t.Fatal(err)
			}
			if payload != want.payload || runAt != want.runAt.UnixMilli() || maxAttempts != want.maxAttempts {
				t.Errorf("job %s: payload %s, run_at %v, max_attempts %d; want %s, %v, %d",
					id, payload, time.UnixMilli(runAt).UTC(), maxAttempts, want.payload, want.runAt, want.maxAttempts)
			}
		}
	})
}

// TestRetireLeavesOtherKeysAlone: Retire marks done the pending job of its
// own key only.
func TestRetireLeavesOtherKeysAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		for id, a := range map[string]widgetArgs{"mine": {ID: "w1"}, "other": {ID: "w2"}} {
			st, err := job.New(a).Insert(id, now)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Exec(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.Exec(ctx, job.Retire(widgetArgs{ID: "w1"}, now))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Query(ctx, `SELECT id, status FROM jobs ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for i := range rows.Len() {
			var id, status string
			if err := rows.Scan(i, &id, &status); err != nil {
				t.Fatal(err)
			}
			got[id] = status
		}
		if res[0].RowsAffected != 1 || got["mine"] != job.StatusDone || got["other"] != job.StatusPending {
			t.Fatalf("Retire of w1 changed %d jobs: %v; want mine done and other pending", res[0].RowsAffected, got)
		}
	})
}
