-- Flows, runs and runners (spec pipelines.md "Running tickets").

-- A ticket's run through its pipeline. At most one active flow per item.
CREATE TABLE flows (
    id               TEXT    PRIMARY KEY,
    organization_id  TEXT    NOT NULL,
    project_id       TEXT    NOT NULL,
    item_id          TEXT    NOT NULL REFERENCES items (id),
    pipeline         TEXT    NOT NULL,
    pipeline_version INTEGER NOT NULL,
    definition       TEXT    NOT NULL, -- JSON of the pinned version
    stage            TEXT    NOT NULL,
    iteration        INTEGER NOT NULL,
    max_iterations   INTEGER NOT NULL,
    step             INTEGER NOT NULL, -- counts stage entries; keys the jobs and runs of each
    status           TEXT    NOT NULL CHECK (status IN ('running', 'waiting', 'done', 'failed', 'stopped')),
    waiting          TEXT,             -- approval, answer, run, checks, review, merge, budget, pause
    run_id           TEXT,
    outcome          TEXT,             -- the last stage outcome …
    report           TEXT,             -- … its report …
    outcome_stage    TEXT,             -- … and the stage that reported them
    pull_request     TEXT,             -- JSON of the merge stage's pull request, once found
    started_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    version          INTEGER NOT NULL
);
CREATE UNIQUE INDEX flows_active ON flows (item_id) WHERE status IN ('running', 'waiting');
CREATE INDEX flows_project ON flows (project_id, status);
CREATE INDEX flows_status ON flows (status, waiting);

-- One agent session for one stage step.
CREATE TABLE runs (
    id                TEXT    PRIMARY KEY,
    organization_id   TEXT    NOT NULL,
    project_id        TEXT    NOT NULL,
    item_id           TEXT    NOT NULL REFERENCES items (id),
    flow_id           TEXT    NOT NULL REFERENCES flows (id),
    stage             TEXT    NOT NULL,
    iteration         INTEGER NOT NULL,
    step              INTEGER NOT NULL,
    adapter           TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    instructions      TEXT    NOT NULL,
    skills            TEXT    NOT NULL, -- JSON array of allowed skill names (empty: all)
    artifacts         TEXT    NOT NULL, -- JSON: ticket, previous report, answered questions
    status            TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    runner_id         TEXT,
    token_id          TEXT,
    outcome           TEXT,
    report            TEXT,
    blocking_question INTEGER NOT NULL,
    exit_status       INTEGER,
    error             TEXT,
    input_tokens      INTEGER NOT NULL,
    output_tokens     INTEGER NOT NULL,
    cost_micros       INTEGER NOT NULL,
    cancel_requested  INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    started_at        INTEGER,
    heartbeat_at      INTEGER,
    finished_at       INTEGER,
    updated_at        INTEGER NOT NULL,
    version           INTEGER NOT NULL
);
-- A flow step has at most one run: creating it again is a no-op.
CREATE UNIQUE INDEX runs_step ON runs (flow_id, step);
CREATE INDEX runs_queue ON runs (status, created_at);
CREATE INDEX runs_item ON runs (item_id, created_at);
CREATE INDEX runs_runner ON runs (runner_id, status);

CREATE TABLE runners (
    id           TEXT    PRIMARY KEY,
    name         TEXT    NOT NULL,
    token_id     TEXT    NOT NULL,
    labels       TEXT    NOT NULL, -- JSON object
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    version      INTEGER NOT NULL
);
