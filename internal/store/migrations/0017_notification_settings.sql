-- A person's notification choices (issue 26): the address mail goes to, which causes reach them and
-- how, their digest and time zone. One row per person who chose something or whose address is known;
-- a person without a row has the defaults (docs/notifications.md). Owner: internal/notify.
CREATE TABLE notification_settings (
    subject            TEXT    PRIMARY KEY,       -- the person's subject
    email              TEXT,                      -- NULL: no address known
    email_source       TEXT,                      -- 'oidc' (a verified email claim) or 'entered'
    email_confirmed_at INTEGER,                   -- NULL while an entered address waits for its confirmation
    confirm_hash       TEXT,                      -- SHA-256 (hex) of the pending confirmation link's token
    confirm_expires_at INTEGER,
    causes             TEXT    NOT NULL DEFAULT '{}', -- JSON object cause → "mail" | "inbox" | "off"; absent: the default
    digest             TEXT    NOT NULL DEFAULT 'period', -- 'period' ([digest] every), 'weekly' or 'off'
    digest_hour        INTEGER,                   -- with a 24 h period: the hour of day (0–23) in time_zone; NULL: none chosen
    time_zone          TEXT    NOT NULL DEFAULT 'UTC', -- an IANA name
    updated_at         INTEGER NOT NULL,
    version            INTEGER NOT NULL
);
CREATE UNIQUE INDEX notification_settings_confirm ON notification_settings (confirm_hash) WHERE confirm_hash IS NOT NULL;
