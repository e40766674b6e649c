-- Escalation, subscriptions and runner.missing (issue 26).
-- A blocking question still open after [notify] escalate_after is escalated to the project's admins, once:
-- escalated_at is when (NULL: not escalated). Owner: internal/tracker.
ALTER TABLE questions ADD COLUMN escalated_at INTEGER;
-- A flow's approval wait escalated likewise: escalated_step is the step of the wait that was escalated,
-- escalated_at when; the wait at another step is not escalated. Owner: internal/flow.
ALTER TABLE flows ADD COLUMN escalated_step INTEGER;
ALTER TABLE flows ADD COLUMN escalated_at INTEGER;
-- The queued run whose missing runner was last recorded (flow.runner_missing): once per run a flow
-- waits for. Owner: internal/flow.
ALTER TABLE flows ADD COLUMN runner_missing_run TEXT;
-- A project's own escalate_after (a Go duration such as "2h"; NULL: [notify] escalate_after).
-- Owner: internal/tenancy.
ALTER TABLE projects ADD COLUMN notify_escalate_after TEXT;
-- The people subscribed to a ticket: its questions and approvals reach them too
-- (docs/notifications.md). Owner: internal/notify.
CREATE TABLE item_subscriptions (
    item_id         TEXT    NOT NULL,
    subject         TEXT    NOT NULL, -- the person's subject
    organization_id TEXT    NOT NULL,
    project_id      TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (item_id, subject)
);
CREATE INDEX item_subscriptions_subject ON item_subscriptions (subject);
