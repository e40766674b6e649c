-- Retention of deliveries ([retention] deliveries): webhook deliveries that ended, and digests, by
-- when they ended, for the leader's retention job (internal/retention) to find oldest first.
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (updated_at) WHERE status != 'pending';
CREATE INDEX digests_ended ON digests (created_at) WHERE status != 'pending';
