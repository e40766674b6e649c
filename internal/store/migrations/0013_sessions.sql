-- Browser sessions (issue 16): the opaque value of the ballet_session cookie, stored only as its
-- SHA-256 hash, acting as the credential that started it (a bootstrap, API token or OIDC sign-in).
-- In the database, so every Core instance honours every session. A session lives until expires_at
-- (absolute: [auth] session_ttl, capped by its credential's expiry) or until it ends (sign-out,
-- or the revocation of the API token that started it). last_seen_at is an operational column,
-- written without an event. Owner: internal/auth.
CREATE TABLE sessions (
    id             TEXT    PRIMARY KEY,
    hash           TEXT    NOT NULL UNIQUE,
    source         TEXT    NOT NULL CHECK (source IN ('bootstrap', 'token', 'oidc')),
    subject        TEXT    NOT NULL, -- the principal's subject ("bootstrap", "token:<id>", an OIDC subject)
    kind           TEXT    NOT NULL, -- human or service, as the credential
    name           TEXT    NOT NULL, -- for people: the token's name, the OIDC name or email
    platform_admin INTEGER NOT NULL, -- as the credential was at sign-in (re-derived on every use)
    token_id       TEXT,             -- source token: the API token that started it
    source_hash    TEXT,             -- source bootstrap: the hash of the bootstrap token then
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL,
    ended_at       INTEGER,
    version        INTEGER NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id) WHERE token_id IS NOT NULL;
