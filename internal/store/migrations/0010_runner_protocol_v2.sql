-- The runner protocol, version 2: a runner's capacity, adapters, software
-- version, problem and draining flag; a run's cache tokens. A runner
-- registered before names no adapters: it was offered every run, so it
-- keeps both adapters (with an unknown version).
ALTER TABLE runners ADD COLUMN capacity INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runners ADD COLUMN adapters TEXT NOT NULL DEFAULT '[{"name":"claude-code","version":""},{"name":"opencode","version":""}]';
ALTER TABLE runners ADD COLUMN runner_version TEXT NOT NULL DEFAULT '';
ALTER TABLE runners ADD COLUMN problem TEXT NOT NULL DEFAULT '';
ALTER TABLE runners ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runners_token_name ON runners (token_id, name);
CREATE INDEX runners_seen ON runners (last_seen_at);
ALTER TABLE runs ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
