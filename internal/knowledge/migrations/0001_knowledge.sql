-- The Knowledge service's own database (spec data.md "Databases"): spaces
-- per organization, entries with all their versions, the search index and
-- the service's event log. Core never opens it, and the service never
-- opens Core's.

-- The lost-race guard, as in Core: this table stays empty.
CREATE TABLE race_guard (
    lost INTEGER CONSTRAINT ballet_lost_race CHECK (lost = 0)
);

-- The service's event log: Core's event fields (spec data.md "Event log").
-- organization_id holds the organization's slug (immutable in Core): the
-- service knows organizations by the slug in its paths.
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
CREATE INDEX events_entity ON events (entity_type, entity_id, seq);

-- Spaces of an organization. "default" exists for every organization: its
-- row is written with the first entry in it.
CREATE TABLE spaces (
    id          TEXT    PRIMARY KEY,
    org         TEXT    NOT NULL,
    slug        TEXT    NOT NULL,
    title       TEXT    NOT NULL,
    description TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    UNIQUE (org, slug)
);

-- Entries: the current version of each, its number and whether it is
-- deleted (softly: undelete brings it back).
CREATE TABLE entries (
    id         TEXT    PRIMARY KEY,
    org        TEXT    NOT NULL,
    space      TEXT    NOT NULL,
    slug       TEXT    NOT NULL,
    title      TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    tags       TEXT    NOT NULL, -- JSON array of strings, sorted
    version    INTEGER NOT NULL,
    deleted    INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    note       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT    NOT NULL,
    UNIQUE (org, space, slug)
);

-- Every version of every entry, immutable.
CREATE TABLE entry_versions (
    entry_id TEXT    NOT NULL,
    version  INTEGER NOT NULL,
    title    TEXT    NOT NULL,
    body     TEXT    NOT NULL,
    tags     TEXT    NOT NULL,
    author   TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    note     TEXT    NOT NULL,
    PRIMARY KEY (entry_id, version)
);

-- The search index (FTS5): the current version of every entry, keyed by
-- the entry's rowid; written in the same batch as the entry. scope holds
-- a token of the entry's organization and one of its space, so that a
-- search matches within them only (its cost is the organization's, not
-- the whole database's); it is the last column, so that a snippet never
-- comes from it.
CREATE VIRTUAL TABLE entry_search USING fts5(title, body, tags, scope, tokenize = 'porter unicode61 remove_diacritics 2');
