-- +goose NO TRANSACTION
-- +goose Up
-- Every success writes its provider charge, and every index of provider_charges an entry
-- for it. No statement addresses a charge by its id: a charge is found by its provider's
-- (provider, charge_ref) key, by its operation, by when Settle saw it, and, an orphan, by
-- when it was charged; the id only orders the charges of one operation that were charged at
-- the same time. The retention deletes old orphans through provider_charges_orphan_idx by
-- their charge time and id. So the provider's key, unique already, becomes the primary key,
-- and the index on the id goes: a charge takes one entry fewer, and the table keeps a
-- primary key, which logical replication (a blue/green upgrade, change data capture)
-- identifies rows by. The id stays unique as an identity column always generated makes it.
-- The new index is built beside the old one without blocking writes; the swap takes the
-- table's lock for a moment (both columns are NOT NULL already, so nothing is scanned).
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS provider_charges_ref_pkey ON provider_charges (provider, charge_ref);
ALTER TABLE provider_charges
    DROP CONSTRAINT provider_charges_pkey,
    DROP CONSTRAINT provider_charges_provider_charge_ref_key,
    ADD CONSTRAINT provider_charges_pkey PRIMARY KEY USING INDEX provider_charges_ref_pkey;

-- +goose Down
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS provider_charges_id_pkey ON provider_charges (id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS provider_charges_ref_key ON provider_charges (provider, charge_ref);
ALTER TABLE provider_charges
    DROP CONSTRAINT provider_charges_pkey,
    ADD CONSTRAINT provider_charges_pkey PRIMARY KEY USING INDEX provider_charges_id_pkey,
    ADD CONSTRAINT provider_charges_provider_charge_ref_key UNIQUE USING INDEX provider_charges_ref_key;
