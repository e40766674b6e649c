-- Retention ([retention], issue 28): what the leader's retention job deletes, found through an index
-- each, oldest first, in small batches.
--
-- A run's log deleted by retention: when (NULL: kept). GET /runs/{run}/log answers 410 once it is set.
-- Written without an event or a version bump, like the log itself (operational data).
ALTER TABLE runs ADD COLUMN log_deleted_at INTEGER;
-- Ended runs whose log is still kept, by when they ended.
CREATE INDEX runs_log_kept ON runs (finished_at) WHERE finished_at IS NOT NULL AND log_deleted_at IS NULL;
-- Finished jobs by when they finished (only finished ones are in the index).
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status IN ('done', 'dead');
-- Sessions by when they stop counting: their expiry, or their end.
CREATE INDEX sessions_expiry ON sessions (expires_at);
CREATE INDEX sessions_ended ON sessions (ended_at) WHERE ended_at IS NOT NULL;
-- Read notifications by when they were read.
CREATE INDEX notifications_read ON notifications (read_at) WHERE read_at IS NOT NULL;
