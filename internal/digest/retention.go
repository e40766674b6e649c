package digest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// DeleteOldDigests deletes up to limit digests written before cutoff
// ([retention] deliveries) whose sending ended (sent, failed, skipped or
// empty), oldest first. A person's latest digest always stays: the next
// one starts where it ended. It reads their ids, then deletes them in one
// batch whose statement checks all of that again. It returns how many it
// read (fewer than limit: none is left) and deleted.
func DeleteOldDigests(ctx context.Context, s store.Store, cutoff time.Time, limit int) (read, deleted int, err error) {
	c := cutoff.UnixMilli()
	const later = `EXISTS (SELECT 1 FROM digests n WHERE n.subject = digests.subject AND n.period_at > digests.period_at)`
	rows, err := s.Query(ctx, `SELECT id FROM digests WHERE status != 'pending' AND created_at < ? AND `+later+` ORDER BY created_at LIMIT ?`, c, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("read old digests: %w", err)
	}
	if rows.Len() == 0 {
		return 0, 0, nil
	}
	ids := make([]string, rows.Len())
	for i := range ids {
		if err := rows.Scan(i, &ids[i]); err != nil {
			return 0, 0, fmt.Errorf("read old digests: %w", err)
		}
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, fmt.Errorf("old digests: %w", err)
	}
	res, err := s.Exec(ctx, store.Stmt(`DELETE FROM digests WHERE id IN (SELECT value FROM json_each(?))
AND status != 'pending' AND created_at < ? AND `+later, string(list), c))
	if err != nil {
		return len(ids), 0, fmt.Errorf("delete %d old digests: %w", len(ids), err)
	}
	return len(ids), int(res[0].RowsAffected), nil
}
