-- +goose NO TRANSACTION
-- +goose Up
-- Claims take turns by tenant (ClaimJobs): each claim serves the tenants with a claimable job
-- in the order of their last claims, least recent first, and each tenant's jobs oldest
-- first, so a tenant that queues a flood of jobs does not make every other tenant wait
-- behind it. A tenant's turn is read from its jobs: claim_seq numbers every claim from one
-- sequence, so the turns follow the order the claims committed in whatever the workers'
-- clocks say, and the largest of a tenant's is its last claim. jobs_tenant_claimable_idx
-- finds the tenants with a job in the queues, skipping from one tenant's entries to the
-- next's, and each one's oldest due jobs without reading another tenant's, however many that
-- one queued, stopping at the first not due yet; it replaces jobs_runnable_idx, which only
-- the claims read. Built and dropped concurrently: jobs takes writes throughout. Jobs claimed
-- before have no claim_seq, so their tenants' first turn comes first.
CREATE SEQUENCE IF NOT EXISTS jobs_claim_seq;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS claim_seq bigint;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_tenant_claimable_idx ON jobs (tenant_id, run_after, created_at, id)
    WHERE status IN ('queued', 'running', 'unknown');
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_tenant_claim_seq_idx ON jobs (tenant_id, claim_seq)
    WHERE claim_seq IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS jobs_runnable_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_runnable_idx ON jobs (run_after, created_at)
    WHERE status IN ('queued', 'running');
DROP INDEX CONCURRENTLY IF EXISTS jobs_tenant_claim_seq_idx;
DROP INDEX CONCURRENTLY IF EXISTS jobs_tenant_claimable_idx;
ALTER TABLE jobs DROP COLUMN IF EXISTS claim_seq;
DROP SEQUENCE IF EXISTS jobs_claim_seq;
