-- GET /api/v1/needs-me reads the open blocking questions of every project a person may read, oldest
-- first: this index holds only those (a few), however many questions were ever answered.
CREATE INDEX questions_open_blocking ON questions (asked_at, id) WHERE blocking = 1 AND answered_at IS NULL;
