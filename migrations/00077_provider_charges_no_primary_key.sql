-- +goose NO TRANSACTION
-- +goose Up
-- Every success writes its provider charge, and every index of provider_charges an entry
-- for it. No statement addresses a charge by its id: a charge is found by its provider's
-- (provider, charge_ref) key, by its operation, by when Settle saw it, and, an orphan, by
-- when it was charged; the id only orders the charges of one operation that were charged at
-- the same time. The retention deletes old orphans through provider_charges_orphan_idx by
-- their charge time and id. The id stays unique as an identity column always generated
-- makes it, the guarantee the primary key repeated. Dropping the constraint only locks the
-- table for a moment.
ALTER TABLE provider_charges DROP CONSTRAINT IF EXISTS provider_charges_pkey;

-- +goose Down
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS provider_charges_pkey ON provider_charges (id);
ALTER TABLE provider_charges ADD CONSTRAINT provider_charges_pkey PRIMARY KEY USING INDEX provider_charges_pkey;
