package run

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/store"
)

// logGone is the 410 of a run whose log is deleted ([retention]
// run_logs): the run ended longer ago than Config.LogRetention, or the
// retention job has marked its log deleted (runs.log_deleted_at). The run
// itself, its report and its events are kept.
func (s *Service) logGone(ctx context.Context, r Run) error {
	if r.FinishedAt == nil {
		return nil
	}
	if k := s.cfg.LogRetention; k > 0 && r.FinishedAt.Before(s.clock.Now().Add(-k)) {
		return apperr.New(apperr.Gone, "run %s's log was deleted: logs are kept for %s after their run ends ([retention] run_logs); "+
			"the run, its report and its events are kept", r.ID, k)
	}
	rows, err := s.store.Query(ctx, `SELECT log_deleted_at FROM runs WHERE id = ? AND log_deleted_at IS NOT NULL`, r.ID)
	if err != nil {
		return fmt.Errorf("read whether run %s's log is kept: %w", r.ID, err)
	}
	if rows.Len() == 1 {
		var at int64
		if err := rows.Scan(0, &at); err != nil {
			return fmt.Errorf("read whether run %s's log is kept: %w", r.ID, err)
		}
		return apperr.New(apperr.Gone, "run %s's log was deleted on %s ([retention] run_logs); the run, its report and its events are kept",
			r.ID, store.Time(at).UTC().Format(time.RFC3339))
	}
	return nil
}

// DeleteOldLogs deletes the logs of runs that ended before cutoff
// ([retention] run_logs), at most runs runs' and chunks chunks per batch:
// it reads the oldest ended runs whose log is kept, then per run the
// starts of its last chunks and deletes them in one batch, from the log's
// end, so that a reader meanwhile sees a shorter log, never a gap; the
// batch that deletes a run's last chunks marks the log deleted
// (log_deleted_at), after which reads answer 410. It returns how many runs
// it read (fewer than runs: none is left) and how many chunks it deleted.
func (s *Service) DeleteOldLogs(ctx context.Context, cutoff time.Time, runs, chunks int) (read, deleted int, err error) {
	rows, err := s.store.Query(ctx, `SELECT id FROM runs WHERE finished_at IS NOT NULL AND log_deleted_at IS NULL AND finished_at < ?
ORDER BY finished_at LIMIT ?`, cutoff.UnixMilli(), runs)
	if err != nil {
		return 0, 0, fmt.Errorf("read runs with old logs: %w", err)
	}
	for i := range rows.Len() {
		var id string
		if err := rows.Scan(i, &id); err != nil {
			return i, deleted, fmt.Errorf("read runs with old logs: %w", err)
		}
		n, err := s.deleteLog(ctx, id, chunks)
		deleted += n
		if err != nil {
			return i, deleted, err
		}
	}
	return rows.Len(), deleted, nil
}

// deleteLog deletes run id's log, at most chunks chunks per batch, and
// marks it deleted in the last batch. It returns the chunks deleted.
func (s *Service) deleteLog(ctx context.Context, id string, chunks int) (int, error) {
	deleted := 0
	for {
		rows, err := s.store.Query(ctx, `SELECT start FROM run_logs WHERE run_id = ? ORDER BY start DESC LIMIT ?`, id, chunks+1)
		if err != nil {
			return deleted, fmt.Errorf("read run %s's log chunks: %w", id, err)
		}
		n := min(rows.Len(), chunks)
		starts := make([]int64, n)
		for i := range starts {
			if err := rows.Scan(i, &starts[i]); err != nil {
				return deleted, fmt.Errorf("read run %s's log chunks: %w", id, err)
			}
		}
		list, err := json.Marshal(starts)
		if err != nil {
			return deleted, fmt.Errorf("run %s's log chunks: %w", id, err)
		}
		batch := []store.Statement{store.Stmt(`DELETE FROM run_logs WHERE run_id = ? AND start IN (SELECT value FROM json_each(?))`, id, string(list))}
		last := rows.Len() <= chunks
		if last {
			batch = append(batch, store.Stmt(`UPDATE runs SET log_deleted_at = ? WHERE id = ? AND finished_at IS NOT NULL AND log_deleted_at IS NULL`,
				s.clock.Now().UnixMilli(), id))
		}
		res, err := s.store.Exec(ctx, batch...)
		if err != nil {
			return deleted, fmt.Errorf("delete run %s's log chunks: %w", id, err)
		}
		deleted += int(res[0].RowsAffected)
		if last {
			return deleted, nil
		}
	}
}
