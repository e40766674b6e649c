-- The digest (issue 26): one row per person and period, written by the leader when the period's
-- boundary passes. It covers the events after from_seq up to to_seq; the next digest of the person
-- starts at this one's to_seq. The unique key on (subject, period_key) is the guard: two digesters
-- (two Core instances, or one before and after a restart) write one row per person and period.
-- status: 'pending' (a job mails it), 'sent', 'failed' (the job gave up), 'skipped' (no confirmed
-- address when it was to be mailed) or 'empty' (nothing happened: nothing is mailed, the period
-- advances all the same). Owner: internal/digest.
CREATE TABLE digests (
    id         TEXT    PRIMARY KEY,
    subject    TEXT    NOT NULL, -- the person's subject
    period_key TEXT    NOT NULL, -- the boundary that closed the period, RFC 3339 in UTC
    period_at  INTEGER NOT NULL, -- the same boundary, unix milliseconds
    since_at   INTEGER NOT NULL, -- when the period started (the previous digest's boundary): spend is counted from here
    from_seq   INTEGER NOT NULL, -- the events after this seq …
    to_seq     INTEGER NOT NULL, -- … up to this one
    status     TEXT    NOT NULL CHECK (status IN ('pending', 'sent', 'failed', 'skipped', 'empty')),
    needs      INTEGER NOT NULL, -- what the digest counted when it was written
    finished   INTEGER NOT NULL,
    failures   INTEGER NOT NULL,
    error      TEXT,             -- the last sending error of a failed digest
    created_at INTEGER NOT NULL,
    sent_at    INTEGER,
    version    INTEGER NOT NULL
);
CREATE UNIQUE INDEX digests_period ON digests (subject, period_key);
CREATE INDEX digests_latest ON digests (subject, period_at); -- a person's latest digest, without a scan
CREATE INDEX digests_to ON digests (subject, to_seq);
