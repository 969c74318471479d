-- +goose NO TRANSACTION
-- +goose Up
-- A tenant's LLM budget per UTC day, in micro-units of the currency of the price table that
-- costs the gateway's calls; NULL: no budget, and its calls are never checked. Set by
-- 'settle tenant budget'. Adding a nullable column without a default rewrites nothing.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS llm_budget_micros bigint
    CONSTRAINT tenants_llm_budget_positive CHECK (llm_budget_micros > 0);
-- The spend of one tenant's day is read every few seconds by each replica, for tenants with
-- a budget only (LLMSpend): without this index it would walk every LLM operation the tenant
-- ever kept. Neither column changes after the opening, so closes stay heap-only updates.
-- Built concurrently: operations takes writes throughout.
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_tenant_llm_spend_idx ON operations (tenant_id, created_at)
    WHERE kind IN ('llm_call', 'llm_job');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS operations_tenant_llm_spend_idx;
ALTER TABLE tenants DROP COLUMN IF EXISTS llm_budget_micros;
