-- +goose NO TRANSACTION
-- +goose Up
-- A tenant's LLM budget per UTC day, in micro-units of the currency of the price table that
-- costs the gateway's calls; NULL: no budget, and its calls are never checked. Set by
-- 'settle tenant budget'. Adding a nullable column without a default rewrites nothing.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS llm_budget_micros bigint
    CONSTRAINT tenants_llm_budget_positive CHECK (llm_budget_micros > 0);
-- The spend of one tenant's day is read every few seconds by each replica, for tenants with
-- a budget only (LLMSpend): without this index it would walk every LLM operation the tenant
-- ever kept. It holds the UTC day of the opening, and its condition names that day too, so
-- that only a statement naming the same expression, which no other does, can read it: an
-- index on (tenant_id, created_at) WHERE kind IN ('llm_call', 'llm_job') drew the counts of
-- a window (ops/pg/rollupstore), whose double generations are LLM operations of any tenant,
-- into a walk of the whole index when the statistics were older than the window. Neither
-- column changes after the opening, so closes stay heap-only updates. Built concurrently:
-- operations takes writes throughout.
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_tenant_llm_spend_idx
    ON operations (tenant_id, date_bin('1 day', created_at, '2000-01-01 00:00:00+00'))
    WHERE kind IN ('llm_call', 'llm_job') AND date_bin('1 day', created_at, '2000-01-01 00:00:00+00') IS NOT NULL;
-- An index's expression has statistics of its own, sampled at the default target (300 rows
-- a unit, 30,000 rows): as low as operations' searched columns (migration 00080), so ANALYZE
-- still samples 6,000 rows of a table whose calls carry their bodies inline.
ALTER INDEX operations_tenant_llm_spend_idx ALTER COLUMN 2 SET STATISTICS 20;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS operations_tenant_llm_spend_idx;
ALTER TABLE tenants DROP COLUMN IF EXISTS llm_budget_micros;
