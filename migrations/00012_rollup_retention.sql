-- +goose Up
-- Minute rollups and minute backlog snapshots are kept for a while (SETTLE_ROLLUP_MINUTES_KEEP);
-- quarter hours, hours and hourly snapshots are kept for good. minutes_from is the first
-- minute whose minute rows are still kept (NULL: every one), which readers check and the
-- job honours when an old operation changes.
ALTER TABLE rollup_state ADD COLUMN minutes_from timestamptz;

-- +goose Down
ALTER TABLE rollup_state DROP COLUMN minutes_from;
