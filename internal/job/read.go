package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// Querier runs a read (a store.Store does).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
}

// Record is a job as stored, as the reads below return it.
type Record struct {
	Kind      string
	Status    string
	LastError string
	Failures  int // the handler's errors in a row (a dead job's: those that killed it)
	Payload   json.RawMessage
	CreatedAt time.Time
}

// freeSQL reads which of a list of dedupe keys (a JSON array) no pending
// or running job holds: one index lookup per key (jobs_dedupe), and only
// the free keys come back.
const freeSQL = `SELECT k.value FROM json_each(?) k
WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.dedupe_key = k.value AND j.status IN ('pending', 'running'))`

// Free returns the keys, of those given, that no pending or running job
// holds: enqueueing a job under one of them would not be a no-op. A key
// given twice comes back twice when free.
func Free(ctx context.Context, q Querier, keys ...string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("read free job keys: %w", err)
	}
	rows, err := q.Query(ctx, freeSQL, string(list))
	if err != nil {
		return nil, fmt.Errorf("read free job keys: %w", err)
	}
	out := make([]string, rows.Len())
	for i := range out {
		if err := rows.Scan(i, &out[i]); err != nil {
			return nil, fmt.Errorf("read free job keys: %w", err)
		}
	}
	return out, nil
}

// lastSQL reads the job of a dedupe key that counts: a pending or running
// one if there is one, else the newest (index jobs_key).
const lastSQL = `SELECT kind, status, COALESCE(last_error, ''), failures, payload, created_at FROM jobs WHERE dedupe_key = ?
ORDER BY status IN ('pending', 'running') DESC, created_at DESC, id DESC LIMIT 1`

// Last returns the job of a dedupe key that counts: the pending or running
// one if there is one, else the newest (ok=false: none was ever queued, or
// its rows are gone).
func Last(ctx context.Context, q Querier, key string) (Record, bool, error) {
	rows, err := q.Query(ctx, lastSQL, key)
	if err != nil {
		return Record{}, false, fmt.Errorf("read the job %s: %w", key, err)
	}
	if rows.Len() == 0 {
		return Record{}, false, nil
	}
	var r Record
	var payload string
	var created int64
	if err := rows.Scan(0, &r.Kind, &r.Status, &r.LastError, &r.Failures, &payload, &created); err != nil {
		return Record{}, false, fmt.Errorf("read the job %s: %w", key, err)
	}
	r.Payload, r.CreatedAt = json.RawMessage(payload), store.Time(created)
	return r, true, nil
}
