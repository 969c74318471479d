-- +goose Up
-- The retention (SETTLE_RETENTION) removes closed operations and every row hanging from them
-- once their closing is older than the retention. removed_before is the cutoff of the last
-- pass that removed an operation: every removed operation was created and closed before it.
-- The rollup job never recomputes an hour before it from raw rows (they may be gone), so the
-- rollups of those hours stay as they were computed, for good.
CREATE TABLE retention_state (
    name           text PRIMARY KEY,
    removed_before timestamptz,
    last_run_at    timestamptz,
    last_report    jsonb
);

-- Deleting an operation checks that no job names it; without this, one scan of jobs per
-- operation removed.
CREATE INDEX jobs_operation_idx ON jobs (operation_id) WHERE operation_id IS NOT NULL;

-- +goose Down
DROP INDEX jobs_operation_idx;
DROP TABLE retention_state;
