-- +goose NO TRANSACTION
-- +goose Up
-- A job whose generation is unknown waits for its operation's close. It used to wait in
-- jobs_tenant_claimable_idx, and every claim walked each such job of every busy tenant and
-- looked its operation up: a tenant with thousands of unknown jobs (a provider outage, or
-- calls it makes time out) made every tenant's claims read thousands of pages. An unknown job
-- now leaves the claimable index, and the close of its operation makes it queued again.
--
-- jobs_requeue_unknown runs inside the statement that closes an llm_job operation, whichever
-- path closes it (a worker's attempt, a lookup, a webhook, the reconciler, the reaper, a
-- person, an approval), so the job is queued again with the close or not at all: nothing is
-- lost to a crash between the two. It is a trigger rather than a part of each close statement
-- for the reason follow_ups_settle is (00030): as a volatile function its statement sees a
-- fresh snapshot, so a job a worker made unknown while the close waited for the operation's
-- row (ChangeJob holds a share lock on it) is queued too, where a part of the close statement
-- would read the snapshot taken before the wait and miss it. The job keeps its run_after, so
-- it is due at once and goes before its tenant's newer jobs, as it did when claims read it;
-- jobs_unknown_idx finds an operation's unknown jobs. A job is made unknown only beside an
-- operation that is unknown or expired (ChangeJob queues it otherwise), and such an
-- operation leaves those statuses only by a close, so the trigger fires on those closes
-- alone, not on every generation that succeeds.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION jobs_requeue_unknown() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET status = 'queued', updated_at = NEW.updated_at
    WHERE operation_id = NEW.id AND status = 'unknown';
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS operations_requeue_jobs ON operations;
CREATE TRIGGER operations_requeue_jobs AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (NEW.kind = 'llm_job' AND OLD.status IN ('unknown', 'expired') AND NEW.status IN ('succeeded', 'failed'))
    EXECUTE FUNCTION jobs_requeue_unknown();
-- The unknown jobs whose operation was closed before the trigger existed.
UPDATE jobs j SET status = 'queued', updated_at = o.updated_at
FROM operations o
WHERE o.id = j.operation_id AND j.status = 'unknown' AND o.status IN ('succeeded', 'failed');
-- The claimable index without the unknown jobs, built under another name and renamed once the
-- old one is gone, so claims always have one: jobs takes writes throughout.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_tenant_claimable_next_idx ON jobs (tenant_id, run_after, created_at, id)
    WHERE status IN ('queued', 'running');
DROP INDEX CONCURRENTLY IF EXISTS jobs_tenant_claimable_idx;
ALTER INDEX jobs_tenant_claimable_next_idx RENAME TO jobs_tenant_claimable_idx;

-- +goose Down
-- Claims read the unknown jobs again and take those whose operation was closed; the queued
-- jobs the trigger made stay queued, which they take too.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_tenant_claimable_next_idx ON jobs (tenant_id, run_after, created_at, id)
    WHERE status IN ('queued', 'running', 'unknown');
DROP INDEX CONCURRENTLY IF EXISTS jobs_tenant_claimable_idx;
ALTER INDEX jobs_tenant_claimable_next_idx RENAME TO jobs_tenant_claimable_idx;
DROP TRIGGER IF EXISTS operations_requeue_jobs ON operations;
DROP FUNCTION IF EXISTS jobs_requeue_unknown();
