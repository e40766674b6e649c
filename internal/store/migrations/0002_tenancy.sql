-- Tenancy, tracker, questions, skills and access (issue "Tenancy, tracker,
-- questions and access control"). Every row that changes carries a version
-- for optimistic concurrency; times are unix milliseconds bound from Go.

CREATE TABLE organizations (
    id         TEXT    PRIMARY KEY,
    slug       TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version    INTEGER NOT NULL
);

CREATE TABLE projects (
    id                   TEXT    PRIMARY KEY,
    organization_id      TEXT    NOT NULL REFERENCES organizations (id),
    key                  TEXT    NOT NULL UNIQUE,
    name                 TEXT    NOT NULL,
    repo_forge           TEXT,
    repo_url             TEXT,
    repo_default_branch  TEXT,
    repo_credentials_ref TEXT,
    merge_policy         TEXT    NOT NULL,
    required_approvals   INTEGER NOT NULL,
    required_checks      TEXT    NOT NULL, -- JSON array of check names
    concurrency_limit    INTEGER NOT NULL, -- 0: no project limit
    budget_ticket_micros INTEGER,          -- per ticket, micro-USD; NULL: none
    budget_day_micros    INTEGER,          -- per day, micro-USD; NULL: none
    ticket_types         TEXT    NOT NULL, -- JSON array
    paused               INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    version              INTEGER NOT NULL
);
CREATE INDEX projects_organization ON projects (organization_id, key);

-- The platform: one row, the kill switch and the global concurrency limit.
CREATE TABLE platform (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    paused            INTEGER NOT NULL,
    concurrency_limit INTEGER NOT NULL, -- 0: no platform limit
    updated_at        INTEGER NOT NULL,
    version           INTEGER NOT NULL
);
INSERT INTO platform (id, paused, concurrency_limit, updated_at, version) VALUES (1, 0, 0, 0, 1);

-- Roles per organization (project_id = '') or per project (an override).
CREATE TABLE memberships (
    organization_id TEXT    NOT NULL REFERENCES organizations (id),
    project_id      TEXT    NOT NULL,
    subject         TEXT    NOT NULL,
    role            TEXT    NOT NULL CHECK (role IN ('viewer', 'member', 'admin')),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL,
    PRIMARY KEY (organization_id, project_id, subject)
);
CREATE INDEX memberships_subject ON memberships (subject);

-- Tickets and epics.
CREATE TABLE items (
    id                  TEXT    PRIMARY KEY,
    organization_id     TEXT    NOT NULL,
    project_id          TEXT    NOT NULL REFERENCES projects (id),
    number              INTEGER NOT NULL,
    key                 TEXT    NOT NULL UNIQUE,
    type                TEXT    NOT NULL,
    title               TEXT    NOT NULL,
    description         TEXT    NOT NULL,
    acceptance_criteria TEXT    NOT NULL,
    epic_id             TEXT,
    state               TEXT    NOT NULL CHECK (state IN ('backlog', 'ready', 'in_progress', 'waiting_for_answer', 'paused', 'done', 'cancelled')),
    created_by          TEXT    NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    version             INTEGER NOT NULL
);
CREATE UNIQUE INDEX items_number ON items (project_id, number);
CREATE INDEX items_state ON items (project_id, state, number);
CREATE INDEX items_epic ON items (epic_id);

-- item_id is blocked by blocker_id.
CREATE TABLE blockers (
    item_id    TEXT    NOT NULL REFERENCES items (id),
    blocker_id TEXT    NOT NULL REFERENCES items (id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (item_id, blocker_id)
);
CREATE INDEX blockers_blocker ON blockers (blocker_id);

-- Serializes changes to an organization's blocker graph, so that two
-- concurrent additions cannot close a cycle together.
CREATE TABLE graph_versions (
    organization_id TEXT    PRIMARY KEY,
    version         INTEGER NOT NULL
);

CREATE TABLE questions (
    id              TEXT    PRIMARY KEY,
    organization_id TEXT    NOT NULL,
    project_id      TEXT    NOT NULL,
    item_id         TEXT    NOT NULL REFERENCES items (id),
    text            TEXT    NOT NULL,
    blocking        INTEGER NOT NULL,
    asked_by_kind   TEXT    NOT NULL,
    asked_by        TEXT    NOT NULL,
    asked_at        INTEGER NOT NULL,
    answer          TEXT,
    answered_by     TEXT,
    answered_at     INTEGER,
    version         INTEGER NOT NULL
);
CREATE INDEX questions_item ON questions (item_id, asked_at);

CREATE TABLE skills (
    id          TEXT    PRIMARY KEY,
    project_id  TEXT    NOT NULL REFERENCES projects (id),
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL,
    content     TEXT    NOT NULL,
    deleted     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL,
    version     INTEGER NOT NULL
);
CREATE UNIQUE INDEX skills_name ON skills (project_id, name) WHERE deleted = 0;

-- Every version of every skill is kept.
CREATE TABLE skill_versions (
    skill_id    TEXT    NOT NULL REFERENCES skills (id),
    version     INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL,
    content     TEXT    NOT NULL,
    deleted     INTEGER NOT NULL,
    created_by  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (skill_id, version)
);

-- Opaque service tokens (API, runner, run), stored as SHA-256 hashes.
CREATE TABLE tokens (
    id              TEXT    PRIMARY KEY,
    hash            TEXT    NOT NULL UNIQUE,
    kind            TEXT    NOT NULL CHECK (kind IN ('api', 'runner', 'run')),
    name            TEXT    NOT NULL,
    subject         TEXT    NOT NULL,
    acting_for      TEXT,
    organization_id TEXT,
    role            TEXT,   -- api tokens: viewer, member, admin or platform_admin
    scopes          TEXT    NOT NULL, -- JSON array
    expires_at      INTEGER,
    revoked_at      INTEGER,
    created_by      TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL
);
CREATE INDEX tokens_created_by ON tokens (created_by);
