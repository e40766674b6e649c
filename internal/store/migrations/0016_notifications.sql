-- Notifications (issue 26). A ticket's optional assignee: the subject of a project member, the first
-- person its questions and approvals reach (NULL: none; its creator then). Owner: internal/tracker.
ALTER TABLE items ADD COLUMN assignee TEXT;

-- The cursors of the event log's consumers: one row per consumer, the last seq it processed. A
-- consumer advances its row in the same batch as what it writes for the events up to there, with
-- an optimistic guard on the old seq, so two Core instances never both process a batch. The
-- notifier starts at the log's head when this migration runs: an existing installation is not
-- notified of its history. Owner: internal/consumer.
CREATE TABLE event_cursors (
    name       TEXT    PRIMARY KEY,
    seq        INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
INSERT INTO event_cursors (name, seq, updated_at) SELECT 'notify', COALESCE(MAX(seq), 0), 0 FROM events;

-- A person's in-app notifications: one per recipient and cause (the event that caused it and what
-- it asks of the person); read_at is NULL while unread. Owner: internal/notify.
CREATE TABLE notifications (
    id              TEXT    PRIMARY KEY,
    recipient       TEXT    NOT NULL, -- the person's subject
    cause           TEXT    NOT NULL, -- approval.waiting, question.opened, …
    event_id        TEXT    NOT NULL, -- the event that caused it
    event_seq       INTEGER NOT NULL,
    organization_id TEXT    NOT NULL,
    project_id      TEXT    NOT NULL,
    item_id         TEXT    NOT NULL,
    item_key        TEXT    NOT NULL,
    title           TEXT    NOT NULL, -- the ticket's title then
    text            TEXT    NOT NULL, -- what happened, in a line
    link            TEXT    NOT NULL, -- the path of the page where the person acts
    created_at      INTEGER NOT NULL,
    read_at         INTEGER,
    version         INTEGER NOT NULL
);
CREATE UNIQUE INDEX notifications_cause ON notifications (recipient, cause, event_id);
CREATE INDEX notifications_inbox ON notifications (recipient, event_seq);
CREATE INDEX notifications_unread ON notifications (recipient) WHERE read_at IS NULL;
