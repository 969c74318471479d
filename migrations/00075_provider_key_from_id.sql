-- +goose NO TRANSACTION
-- +goose Up
-- A new operation's provider key is 'settle_' and its id (ops.ProviderKeyFor): unique because
-- the id, the primary key, is. The unique constraint took an entry at every insert and every
-- write that is not heap-only, for a guarantee the id already gives; only the random keys of
-- operations opened before, which are never of that form, still need an index to stay
-- unique and to be looked up by. A lookup repeats the predicate so the planner may use the
-- index whatever the key it is given. Built concurrently: operations takes writes
-- throughout; dropping the constraint then only locks the table for a moment.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS operations_provider_key_legacy_idx ON operations (provider_key)
    WHERE provider_key <> 'settle_' || id::text;
ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_provider_key_key;

-- +goose Down
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS operations_provider_key_key ON operations (provider_key);
ALTER TABLE operations ADD CONSTRAINT operations_provider_key_key UNIQUE USING INDEX operations_provider_key_key;
DROP INDEX CONCURRENTLY IF EXISTS operations_provider_key_legacy_idx;
