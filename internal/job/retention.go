package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// DeleteFinished deletes up to limit jobs that finished (done or dead)
// before cutoff, oldest first ([retention] jobs): it reads their ids, then
// deletes them in one batch whose statement re-checks that each is still
// finished before cutoff. It returns how many it read (fewer than limit:
// none is left) and how many it deleted.
func DeleteFinished(ctx context.Context, s store.Store, cutoff time.Time, limit int) (read, deleted int, err error) {
	rows, err := s.Query(ctx, `SELECT id FROM jobs INDEXED BY jobs_finished WHERE status IN ('done', 'dead') AND finished_at < ? ORDER BY finished_at LIMIT ?`,
		cutoff.UnixMilli(), limit)
	if err != nil {
		return 0, 0, fmt.Errorf("read finished jobs: %w", err)
	}
	ids, err := idList(rows)
	if err != nil || rows.Len() == 0 {
		return 0, 0, err
	}
	res, err := s.Exec(ctx, store.Stmt(`DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))
AND status IN ('done', 'dead') AND finished_at < ?`, ids, cutoff.UnixMilli()))
	if err != nil {
		return rows.Len(), 0, fmt.Errorf("delete %d finished jobs: %w", rows.Len(), err)
	}
	return rows.Len(), int(res[0].RowsAffected), nil
}

// idList reads the first column of rows as a JSON array of ids, the one
// parameter of a batch's `IN (SELECT value FROM json_each(?))`.
func idList(rows *store.Rows) (string, error) {
	ids := make([]string, rows.Len())
	for i := range ids {
		if err := rows.Scan(i, &ids[i]); err != nil {
			return "", fmt.Errorf("read an id: %w", err)
		}
	}
	b, err := json.Marshal(ids)
	return string(b), err
}
