-- The lost-race guard: this table stays empty. A transition inserts a row
-- right after its optimistic UPDATE when that UPDATE changed nothing; the
-- CHECK fails and aborts the whole batch with an error naming the
-- constraint on every engine.
CREATE TABLE race_guard (
    lost INTEGER CONSTRAINT ballet_lost_race CHECK (lost = 0)
);

-- The event log (spec data.md "Event log"). Append-only; seq is assigned in
-- commit order and never reused.
CREATE TABLE events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    occurred_at     INTEGER NOT NULL, -- unix milliseconds, UTC
    organization_id TEXT,
    project_id      TEXT,
    entity_type     TEXT    NOT NULL,
    entity_id       TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    actor_kind      TEXT    NOT NULL CHECK (actor_kind IN ('human', 'service', 'system')),
    actor_sub       TEXT,
    acting_for      TEXT,
    payload         TEXT    NOT NULL
);
CREATE INDEX events_organization ON events (organization_id, seq);
CREATE INDEX events_project ON events (project_id, seq);
CREATE INDEX events_entity ON events (entity_type, entity_id, seq);

-- Durable jobs (spec data.md "Durable jobs").
CREATE TABLE jobs (
    id           TEXT    PRIMARY KEY,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'done', 'dead')),
    run_at       INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    dedupe_key   TEXT,
    lease_until  INTEGER,
    claimed_by   TEXT,
    last_error   TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER
);
-- At most one pending or running job per dedupe key.
CREATE UNIQUE INDEX jobs_dedupe ON jobs (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running');
CREATE INDEX jobs_pending ON jobs (status, run_at);
CREATE INDEX jobs_leased ON jobs (status, lease_until);

-- Human key counters: one row per scope (a project's items). A number is
-- allocated by an optimistic update of its row, so it is never reused.
CREATE TABLE key_counters (
    scope TEXT    PRIMARY KEY,
    next  INTEGER NOT NULL
);

-- Leader election among Core instances sharing one database.
CREATE TABLE leader_leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL, -- unix milliseconds
    version    INTEGER NOT NULL
);
