-- What needs-me reads of failing delivery channels (issue 26: "attention says when mail or webhooks
-- are failing"), without reading every delivery ever made: the deliveries being retried after a
-- failed attempt and the failures kept (partial indexes, small while nothing fails), and the hooks
-- 24 hours of failure disabled. Owners: internal/webhook, internal/notify.
CREATE INDEX webhook_deliveries_retrying ON webhook_deliveries (webhook_id, started_at) WHERE status = 'pending' AND attempts > 0;
CREATE INDEX webhook_deliveries_failures ON webhook_deliveries (webhook_id, last_attempt_at) WHERE status IN ('pending', 'failed') AND error IS NOT NULL;
CREATE INDEX webhooks_disabled ON webhooks (disabled_at) WHERE disabled_at IS NOT NULL;
