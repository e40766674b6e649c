-- The reconciler (internal/reconcile) tells a lost step (no job under its
-- dedupe key, or a done one) from a step that failed for good (a dead job)
-- by reading the newest job of the key, whatever its status: jobs_dedupe
-- covers only pending and running jobs, so without this index that read
-- scans the whole jobs table (done jobs are kept).
CREATE INDEX jobs_key ON jobs (dedupe_key, created_at) WHERE dedupe_key IS NOT NULL;

-- The reconciler reads every active flow's step, wait, ticket and run on
-- each pass: covered by this index, it never reads the flows' rows (each
-- holds its pinned pipeline definition, kilobytes of JSON).
CREATE INDEX flows_reconcile ON flows (status, waiting, item_id, step, run_id, stage, id);
