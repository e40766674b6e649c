-- A run whose session ended because of infrastructure (Core or runner restart, runner lost past its
-- grace, runner drain, kill switch, sandbox start failure) ends interrupted, with its reason: its
-- stage runs again without spending an iteration. SQLite cannot change a CHECK constraint, so the
-- runs table is rebuilt: copied aside, dropped, created anew, filled again. run_logs refers to
-- runs: with the foreign keys deferred, the drop's orphaned log rows are counted as violations
-- and refilling runs counts them off again before the batch commits.
PRAGMA defer_foreign_keys = ON;
CREATE TABLE runs_copy AS SELECT * FROM runs;
DROP TABLE runs;
CREATE TABLE runs (
    id                 TEXT    PRIMARY KEY,
    organization_id    TEXT    NOT NULL,
    project_id         TEXT    NOT NULL,
    item_id            TEXT    NOT NULL REFERENCES items (id),
    flow_id            TEXT    NOT NULL REFERENCES flows (id),
    stage              TEXT    NOT NULL,
    iteration          INTEGER NOT NULL,
    step               INTEGER NOT NULL,
    adapter            TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    instructions       TEXT    NOT NULL,
    skills             TEXT    NOT NULL, -- JSON array of allowed skill names (empty: all)
    artifacts          TEXT    NOT NULL, -- JSON: ticket, previous report, answered questions
    status             TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    runner_id          TEXT,
    token_id           TEXT,
    outcome            TEXT,
    report             TEXT,
    blocking_question  INTEGER NOT NULL,
    exit_status        INTEGER,
    error              TEXT,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cost_micros        INTEGER NOT NULL,
    cancel_requested   INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    started_at         INTEGER,
    heartbeat_at       INTEGER,
    finished_at        INTEGER,
    updated_at         INTEGER NOT NULL,
    version            INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    branch_ahead       INTEGER,
    used_model         TEXT,
    log_deleted_at     INTEGER, -- when retention deleted the run's log (0025); NULL: kept
    reason             TEXT -- why an interrupted run was interrupted (or, while running, why it is being stopped); NULL otherwise
);
INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions, skills,
    artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error, input_tokens, output_tokens,
    cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version, cache_read_tokens,
    cache_write_tokens, branch_ahead, used_model, log_deleted_at)
SELECT id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions, skills,
    artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error, input_tokens, output_tokens,
    cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version, cache_read_tokens,
    cache_write_tokens, branch_ahead, used_model, log_deleted_at
FROM runs_copy;
DROP TABLE runs_copy;
CREATE UNIQUE INDEX runs_step ON runs (flow_id, step);
CREATE INDEX runs_queue ON runs (status, created_at);
CREATE INDEX runs_item ON runs (item_id, created_at);
CREATE INDEX runs_runner ON runs (runner_id, status);
CREATE INDEX runs_project_finished ON runs (project_id, finished_at);
-- 0025's: ended runs whose log is still kept, by when they ended.
CREATE INDEX runs_log_kept ON runs (finished_at) WHERE finished_at IS NOT NULL AND log_deleted_at IS NULL;
