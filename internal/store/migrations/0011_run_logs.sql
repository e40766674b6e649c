-- A run's log: its session's output as its runner uploads it (runner protocol v2). Chunks in byte
-- order, each appended where the last one ended (the primary key and the append's guard keep two
-- uploads at one offset from both landing). The bytes are base64 text: rqlite does not carry blobs
-- faithfully. Log chunks are not events. Owner: internal/run.
CREATE TABLE run_logs (
    run_id    TEXT    NOT NULL REFERENCES runs (id),
    start     INTEGER NOT NULL, -- byte offset of the chunk's first byte
    size      INTEGER NOT NULL, -- bytes in the chunk
    truncated INTEGER NOT NULL, -- 1 on the last chunk once the log reached [runs] log_limit
    data      TEXT    NOT NULL, -- the bytes, base64
    PRIMARY KEY (run_id, start)
);
