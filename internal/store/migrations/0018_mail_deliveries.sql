-- Mail (issue 26). One row per notification that is to be mailed: written in the notifier's batch,
-- with the notification and its durable job notify.mail, so a notification's mail is decided once;
-- the job records each attempt here. status: 'pending' (not sent yet), 'retrying' (an attempt
-- failed; another follows), 'sent', 'skipped' (no longer allowed when its turn came: the person
-- lost access, turned that mail off or has no confirmed address), 'failed' (given up: the last
-- attempt or a refusal that no retry can change). Owner: internal/notify.
CREATE TABLE mail_deliveries (
    notification_id TEXT    PRIMARY KEY,
    recipient       TEXT    NOT NULL,
    cause           TEXT    NOT NULL,
    item_key        TEXT    NOT NULL,
    message_id      TEXT    NOT NULL, -- the mail's Message-ID, the same on every attempt
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,             -- the last failure, without any secret
    smtp_code       INTEGER,          -- the server's reply code of the last failure (NULL: not reached)
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    sent_at         INTEGER,
    version         INTEGER NOT NULL
);
CREATE INDEX mail_deliveries_status ON mail_deliveries (status, updated_at);

-- The keys Ballet signs its mail's links with (one-click unsubscribe, address confirmation): made
-- once, on first use, by whichever Core instance needs one first. Owner: internal/notify.
CREATE TABLE notify_keys (
    name       TEXT    PRIMARY KEY,
    secret     TEXT    NOT NULL, -- 32 random bytes, hex
    created_at INTEGER NOT NULL
);
