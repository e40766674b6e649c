package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// DeleteReadNotifications deletes up to limit notifications read before
// cutoff ([retention] notifications), with their finished mail deliveries;
// unread ones are kept, and so is one whose mail is still to be sent
// (pending or retrying). It reads their ids, then deletes them in one
// batch whose statements re-check all of that. It returns how many it read
// (fewer than limit: none is left) and how many notifications it deleted.
func DeleteReadNotifications(ctx context.Context, s store.Store, cutoff time.Time, limit int) (read, deleted int, err error) {
	c := cutoff.UnixMilli()
	const mailing = `EXISTS (SELECT 1 FROM mail_deliveries d WHERE d.notification_id = notifications.id AND d.status IN ('pending', 'retrying'))`
	rows, err := s.Query(ctx, `SELECT id FROM notifications WHERE read_at < ? AND NOT `+mailing+` ORDER BY read_at LIMIT ?`, c, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("read old notifications: %w", err)
	}
	if rows.Len() == 0 {
		return 0, 0, nil
	}
	ids := make([]string, rows.Len())
	for i := range ids {
		if err := rows.Scan(i, &ids[i]); err != nil {
			return 0, 0, fmt.Errorf("read old notifications: %w", err)
		}
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, fmt.Errorf("old notifications: %w", err)
	}
	res, err := s.Exec(ctx,
		store.Stmt(`DELETE FROM mail_deliveries WHERE notification_id IN (SELECT value FROM json_each(?)
WHERE value IN (SELECT id FROM notifications WHERE read_at < ?)) AND status NOT IN ('pending', 'retrying')`, string(list), c),
		store.Stmt(`DELETE FROM notifications WHERE id IN (SELECT value FROM json_each(?)) AND read_at < ?
AND NOT EXISTS (SELECT 1 FROM mail_deliveries d WHERE d.notification_id = notifications.id)`, string(list), c))
	if err != nil {
		return len(ids), 0, fmt.Errorf("delete %d old notifications: %w", len(ids), err)
	}
	return len(ids), int(res[1].RowsAffected), nil
}
