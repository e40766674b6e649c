-- A job's attempt is the fencing token of its claims: every claim, also one
-- taken again after its holder vanished (a Core restart), increments it. The
-- retry policy counts other things, so that restarts cost no backoff:
--   failures: the handler's errors in a row (reset by a success or a snooze),
--     which set the backoff (2^failures s) and, at max_attempts, kill the job;
--   expiries: the claims in a row whose lease ran out without a result (their
--     holder vanished; reset by any recorded result), which kill the job at
--     2 × max_attempts: a job that takes Core down each time still ends.
-- Jobs queued before start both at zero.
ALTER TABLE jobs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN expiries INTEGER NOT NULL DEFAULT 0;
