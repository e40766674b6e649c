-- Webhooks (issue 26): an organization's or a project's subscriptions to the causes that need a
-- person, delivered as signed HTTP requests. project_id is '' for an organization's hook (it hears
-- every project of the organization). secret is the signing key's raw bytes, base64 (the
-- Standard Webhooks symmetric key: Ballet must keep it to sign); it is read by the delivery alone and
-- never answered after the creation. Owner: internal/webhook.
CREATE TABLE webhooks (
    id              TEXT    PRIMARY KEY,
    organization_id TEXT    NOT NULL,
    project_id      TEXT    NOT NULL DEFAULT '',
    url             TEXT    NOT NULL,
    events          TEXT    NOT NULL, -- JSON array of causes, or ["*"]
    format          TEXT    NOT NULL, -- 'standard' or 'slack'
    active          INTEGER NOT NULL,
    secret          TEXT    NOT NULL,
    disabled_at     INTEGER,          -- when deliveries failing for 24 h disabled it (NULL: never, or re-enabled)
    created_by      TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL
);
CREATE INDEX webhooks_scope ON webhooks (organization_id, project_id);

-- One message to one hook: the cause of one event, its body fixed when it was decided (a redelivery
-- sends the same message, under the same webhook-id: the delivery's id). Owner: internal/webhook.
CREATE TABLE webhook_deliveries (
    id              TEXT    PRIMARY KEY,
    webhook_id      TEXT    NOT NULL,
    organization_id TEXT    NOT NULL,
    project_id      TEXT    NOT NULL, -- the ticket's project
    cause           TEXT    NOT NULL,
    item_key        TEXT    NOT NULL,
    event_id        TEXT    NOT NULL, -- the event that caused it
    event_seq       INTEGER NOT NULL,
    payload         TEXT    NOT NULL, -- the message (JSON), signed as sent for the standard format
    status          TEXT    NOT NULL, -- 'pending', 'succeeded', 'failed' (gave up), 'skipped' (the hook was inactive)
    attempts        INTEGER NOT NULL,
    http_status     INTEGER,          -- the last attempt's answer (NULL: none, e.g. a timeout)
    duration_ms     INTEGER,          -- the last attempt's duration
    error           TEXT,             -- the last failure, without the URL
    started_at      INTEGER NOT NULL, -- the current round of attempts began (its 24 h run from here)
    last_attempt_at INTEGER,
    next_attempt_at INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL
);
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (webhook_id, event_id);
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (webhook_id, created_at);

-- The webhook dispatcher's cursor (internal/consumer) starts at the log's head when this migration
-- runs: hooks created later hear what happens from then on, never the history.
INSERT INTO event_cursors (name, seq, updated_at) SELECT 'webhooks', COALESCE(MAX(seq), 0), 0 FROM events;
