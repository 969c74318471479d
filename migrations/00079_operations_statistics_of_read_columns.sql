-- +goose Up
-- Autovacuum analyzes operations once a minute while the table is young and at every tenth
-- of growth later, and computed statistics for every column: for the bodies that means
-- decompressing the sampled requests, answers and stored stream events, and reading some
-- back from TOAST. A plan uses a column's statistics only where a query filters,
-- joins, sorts or groups on it, and no query does on these: they are written, and read back
-- with the row, never searched. ANALYZE still samples the rows (the sample's size follows the
-- columns that keep theirs). Statistics an earlier ANALYZE left for them stay, unused. Setting
-- a column's target takes a lock that lets reads and writes go on.
ALTER TABLE operations
    ALTER COLUMN request SET STATISTICS 0,
    ALTER COLUMN result SET STATISTICS 0,
    ALTER COLUMN stream_events SET STATISTICS 0,
    ALTER COLUMN fingerprint SET STATISTICS 0,
    ALTER COLUMN provider_request_id SET STATISTICS 0,
    ALTER COLUMN closed_by SET STATISTICS 0,
    ALTER COLUMN phase SET STATISTICS 0,
    ALTER COLUMN first_sent_at SET STATISTICS 0,
    ALTER COLUMN duplicate_requests SET STATISTICS 0,
    ALTER COLUMN store_opted_out SET STATISTICS 0,
    ALTER COLUMN followed SET STATISTICS 0,
    ALTER COLUMN retry_uncertain SET STATISTICS 0,
    ALTER COLUMN no_provider_key SET STATISTICS 0,
    ALTER COLUMN has_lookup SET STATISTICS 0;

-- +goose Down
ALTER TABLE operations
    ALTER COLUMN request SET STATISTICS -1,
    ALTER COLUMN result SET STATISTICS -1,
    ALTER COLUMN stream_events SET STATISTICS -1,
    ALTER COLUMN fingerprint SET STATISTICS -1,
    ALTER COLUMN provider_request_id SET STATISTICS -1,
    ALTER COLUMN closed_by SET STATISTICS -1,
    ALTER COLUMN phase SET STATISTICS -1,
    ALTER COLUMN first_sent_at SET STATISTICS -1,
    ALTER COLUMN duplicate_requests SET STATISTICS -1,
    ALTER COLUMN store_opted_out SET STATISTICS -1,
    ALTER COLUMN followed SET STATISTICS -1,
    ALTER COLUMN retry_uncertain SET STATISTICS -1,
    ALTER COLUMN no_provider_key SET STATISTICS -1,
    ALTER COLUMN has_lookup SET STATISTICS -1;
