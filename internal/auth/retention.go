package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// DeleteOldSessions deletes the browser sessions that expired or ended
// before cutoff ([retention] sessions), up to limit of each: such a
// session authenticates nobody any more. It reads their ids, then deletes
// them in one batch whose statement re-checks the cutoff. It returns how
// many it read (fewer than limit: none is left) and how many it deleted.
func DeleteOldSessions(ctx context.Context, s store.Store, cutoff time.Time, limit int) (read, deleted int, err error) {
	c := cutoff.UnixMilli()
	var ids []string
	seen := map[string]bool{}
	for _, q := range []string{
		`SELECT id FROM sessions WHERE expires_at < ? ORDER BY expires_at LIMIT ?`,
		`SELECT id FROM sessions WHERE ended_at < ? ORDER BY ended_at LIMIT ?`,
	} {
		rows, err := s.Query(ctx, q, c, limit)
		if err != nil {
			return 0, 0, fmt.Errorf("read old sessions: %w", err)
		}
		for i := range rows.Len() {
			var id string
			if err := rows.Scan(i, &id); err != nil {
				return 0, 0, fmt.Errorf("read old sessions: %w", err)
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, fmt.Errorf("old sessions: %w", err)
	}
	res, err := s.Exec(ctx, store.Stmt(`DELETE FROM sessions WHERE id IN (SELECT value FROM json_each(?))
AND (expires_at < ? OR ended_at < ?)`, string(list), c, c))
	if err != nil {
		return len(ids), 0, fmt.Errorf("delete %d old sessions: %w", len(ids), err)
	}
	return len(ids), int(res[0].RowsAffected), nil
}
