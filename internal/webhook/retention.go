package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// DeleteOldDeliveries deletes up to limit deliveries that ended
// (succeeded, failed or skipped) before cutoff ([retention] deliveries),
// oldest first; a pending one — waiting for its next attempt — stays. It
// reads their ids, then deletes them in one batch whose statement checks
// both again (a delivery sent again meanwhile is pending and stays). It
// returns how many it read (fewer than limit: none is left) and deleted.
func DeleteOldDeliveries(ctx context.Context, s store.Store, cutoff time.Time, limit int) (read, deleted int, err error) {
	c := cutoff.UnixMilli()
	rows, err := s.Query(ctx, `SELECT id FROM webhook_deliveries WHERE status != 'pending' AND updated_at < ? ORDER BY updated_at LIMIT ?`, c, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("read old webhook deliveries: %w", err)
	}
	if rows.Len() == 0 {
		return 0, 0, nil
	}
	ids := make([]string, rows.Len())
	for i := range ids {
		if err := rows.Scan(i, &ids[i]); err != nil {
			return 0, 0, fmt.Errorf("read old webhook deliveries: %w", err)
		}
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, fmt.Errorf("old webhook deliveries: %w", err)
	}
	res, err := s.Exec(ctx, store.Stmt(`DELETE FROM webhook_deliveries WHERE id IN (SELECT value FROM json_each(?))
AND status != 'pending' AND updated_at < ?`, string(list), c))
	if err != nil {
		return len(ids), 0, fmt.Errorf("delete %d old webhook deliveries: %w", len(ids), err)
	}
	return len(ids), int(res[0].RowsAffected), nil
}
