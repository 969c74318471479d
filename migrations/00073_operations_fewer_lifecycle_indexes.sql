-- +goose NO TRANSACTION
-- +goose Up
-- Each write of an operation is a new row version (status is indexed), so every index whose
-- predicate the version satisfies takes an entry, and every index is opened by every write.
-- An operation in progress is held by a lease: the reaper, the in-progress queue and the
-- expiry of a lease that ran out read those rows through operations_stalled_idx, so the
-- queue and expiry indexes keep only the rows nobody holds. The body purge reads closed
-- calls only, so an open call takes no entry there. operations_queue_idx serves the received
-- rows by age as well as operations_received_idx did, so that one goes. Built and dropped
-- concurrently: operations takes writes throughout.
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_queue_unheld_idx ON operations (status, created_at, id)
    WHERE status IN ('received', 'unknown', 'expired');
DROP INDEX CONCURRENTLY IF EXISTS operations_queue_idx;
ALTER INDEX operations_queue_unheld_idx RENAME TO operations_queue_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_retry_until_unheld_idx ON operations (retry_until)
    WHERE status IN ('received', 'unknown');
DROP INDEX CONCURRENTLY IF EXISTS operations_retry_until_idx;
ALTER INDEX operations_retry_until_unheld_idx RENAME TO operations_retry_until_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_body_purge_closed_idx ON operations (created_at)
    WHERE purged_at IS NULL AND kind IN ('llm_call', 'llm_job') AND status NOT IN ('received', 'in_progress');
DROP INDEX CONCURRENTLY IF EXISTS operations_body_purge_idx;
ALTER INDEX operations_body_purge_closed_idx RENAME TO operations_body_purge_idx;

DROP INDEX CONCURRENTLY IF EXISTS operations_received_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_received_idx ON operations (created_at) WHERE status = 'received';

CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_body_purge_all_idx ON operations (created_at)
    WHERE purged_at IS NULL AND kind IN ('llm_call', 'llm_job');
DROP INDEX CONCURRENTLY IF EXISTS operations_body_purge_idx;
ALTER INDEX operations_body_purge_all_idx RENAME TO operations_body_purge_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_retry_until_all_idx ON operations (retry_until)
    WHERE status IN ('received', 'in_progress', 'unknown');
DROP INDEX CONCURRENTLY IF EXISTS operations_retry_until_idx;
ALTER INDEX operations_retry_until_all_idx RENAME TO operations_retry_until_idx;

CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_queue_all_idx ON operations (status, created_at, id)
    WHERE status IN ('received', 'in_progress', 'unknown', 'expired');
DROP INDEX CONCURRENTLY IF EXISTS operations_queue_idx;
ALTER INDEX operations_queue_all_idx RENAME TO operations_queue_idx;
