-- Provider limits (rate limit, overload, quota): a run interrupted with
-- provider_limit keeps when its runner said the limit resets (NULL: it did
-- not say); a flow waiting for the provider keeps until when (NULL for every
-- other wait); and the limit is shared per provider credential, which Core
-- knows as the adapter's name: a stage of that adapter does not start into
-- it. streak counts the limits in a row on the credential (reset by a run of
-- it that ends otherwise): without a reset time the wait doubles with it.
ALTER TABLE runs ADD COLUMN retry_at INTEGER;
ALTER TABLE flows ADD COLUMN wait_until INTEGER;
CREATE TABLE provider_limits (
    credential TEXT    PRIMARY KEY,
    until      INTEGER NOT NULL, -- unix ms: no stage of the credential starts before this
    streak     INTEGER NOT NULL, -- limits in a row on the credential
    run_id     TEXT    NOT NULL, -- the run that met the latest limit
    updated_at INTEGER NOT NULL,
    version    INTEGER NOT NULL
);
