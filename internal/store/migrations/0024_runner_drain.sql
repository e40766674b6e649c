-- A platform admin's drain of a runner (POST /api/v1/runners/{runner}/drain):
-- when and by whom (NULL: not drained). A drained runner leases no new run
-- until it is undrained; the runs it holds finish. runners.draining stays the
-- runner's own word (its heartbeat, on SIGTERM), which a registration clears;
-- an admin's drain survives both.
ALTER TABLE runners ADD COLUMN drained_at INTEGER;
ALTER TABLE runners ADD COLUMN drained_by TEXT NOT NULL DEFAULT '';
