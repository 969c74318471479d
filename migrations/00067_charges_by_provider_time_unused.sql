-- +goose NO TRANSACTION
-- +goose Up
-- Every success writes its provider charge, and every index of provider_charges an entry
-- for it. No statement reads the charges of one provider by time: the rollups and the
-- retention read the orphans through provider_charges_orphan_idx, the tallies through
-- provider_charges_seen_idx, an exception's charges through its operation and the
-- (provider, charge_ref) key. The index only tempted the planner into reading every charge
-- of a provider for one exception. Dropped concurrently: provider_charges takes writes
-- throughout.
DROP INDEX CONCURRENTLY IF EXISTS provider_charges_charged_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS provider_charges_charged_idx ON provider_charges (provider, charged_at);
