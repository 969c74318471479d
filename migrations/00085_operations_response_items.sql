-- +goose NO TRANSACTION
-- +goose Up
-- A Responses call may name an item of a stored response by its id (an item_reference, an
-- output item given back with its id), and the provider, whose account every tenant shares,
-- reads whichever response holds it. The gateway takes such an id only when it is an output
-- item of one of the calling tenant's own responses, read from the answers Settle keeps
-- (ResponseOutputItems). This index holds the output item ids of each kept answer of the
-- Responses API, and nothing else: a chat completion, whose api is not 'responses', takes no
-- entry, and a call still open, or whose answer the body purge removed, has no result and
-- takes none either. Built concurrently: operations takes writes throughout.
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_response_items_idx ON operations
    USING gin (jsonb_path_query_array(result, '$.output[*].id'))
    WHERE api = 'responses' AND result IS NOT NULL;
-- ANALYZE would keep statistics of the indexed expression, sampling 300 rows per unit of its
-- target (100 by default: 30,000 rows, each answer decompressed to compute it) where the
-- table's columns sample 6,000 (migration 00080). Item ids are unique, so no statistics say
-- more than that: none are kept.
ALTER INDEX operations_response_items_idx ALTER COLUMN 1 SET STATISTICS 0;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS operations_response_items_idx;
