-- +goose Up
-- ANALYZE samples 300 rows per unit of the largest statistics target of a table's columns,
-- and copies every sampled row whole: an operation's row carries its request, answer and
-- stream events inline (compressed), near 2 kB for a gateway call, so the sample of the
-- default target (30,000 rows) was most of the cost, and autovacuum analyzes operations once
-- a minute while the table is young and at every tenth of growth later. A target of 20 keeps
-- a most-common-values list and a histogram of 20 entries for each searched column, enough
-- for the few statuses, kinds, providers and APIs, and for the time ranges the pages read
-- through their indexes; the sample is 6,000 rows. Setting a target takes a lock that lets
-- reads and writes go on.
ALTER TABLE operations
    ALTER COLUMN id SET STATISTICS 20,
    ALTER COLUMN tenant_id SET STATISTICS 20,
    ALTER COLUMN kind SET STATISTICS 20,
    ALTER COLUMN provider SET STATISTICS 20,
    ALTER COLUMN intent_key SET STATISTICS 20,
    ALTER COLUMN provider_key SET STATISTICS 20,
    ALTER COLUMN order_ref SET STATISTICS 20,
    ALTER COLUMN customer_ref SET STATISTICS 20,
    ALTER COLUMN chat_ref SET STATISTICS 20,
    ALTER COLUMN payment_ref SET STATISTICS 20,
    ALTER COLUMN amount_cents SET STATISTICS 20,
    ALTER COLUMN currency SET STATISTICS 20,
    ALTER COLUMN status SET STATISTICS 20,
    ALTER COLUMN version SET STATISTICS 20,
    ALTER COLUMN attempts SET STATISTICS 20,
    ALTER COLUMN lease_owner SET STATISTICS 20,
    ALTER COLUMN lease_until SET STATISTICS 20,
    ALTER COLUMN retry_until SET STATISTICS 20,
    ALTER COLUMN retention_seconds SET STATISTICS 20,
    ALTER COLUMN provider_ref SET STATISTICS 20,
    ALTER COLUMN usage SET STATISTICS 20,
    ALTER COLUMN cost_micros SET STATISTICS 20,
    ALTER COLUMN created_at SET STATISTICS 20,
    ALTER COLUMN updated_at SET STATISTICS 20,
    ALTER COLUMN closed_at SET STATISTICS 20,
    ALTER COLUMN key_waits SET STATISTICS 20,
    ALTER COLUMN purged_at SET STATISTICS 20,
    ALTER COLUMN intent_seq SET STATISTICS 20,
    ALTER COLUMN api SET STATISTICS 20,
    ALTER COLUMN model SET STATISTICS 20,
    ALTER COLUMN stripe_account SET STATISTICS 20;

-- +goose Down
ALTER TABLE operations
    ALTER COLUMN id SET STATISTICS -1,
    ALTER COLUMN tenant_id SET STATISTICS -1,
    ALTER COLUMN kind SET STATISTICS -1,
    ALTER COLUMN provider SET STATISTICS -1,
    ALTER COLUMN intent_key SET STATISTICS -1,
    ALTER COLUMN provider_key SET STATISTICS -1,
    ALTER COLUMN order_ref SET STATISTICS -1,
    ALTER COLUMN customer_ref SET STATISTICS -1,
    ALTER COLUMN chat_ref SET STATISTICS -1,
    ALTER COLUMN payment_ref SET STATISTICS -1,
    ALTER COLUMN amount_cents SET STATISTICS -1,
    ALTER COLUMN currency SET STATISTICS -1,
    ALTER COLUMN status SET STATISTICS -1,
    ALTER COLUMN version SET STATISTICS -1,
    ALTER COLUMN attempts SET STATISTICS -1,
    ALTER COLUMN lease_owner SET STATISTICS -1,
    ALTER COLUMN lease_until SET STATISTICS -1,
    ALTER COLUMN retry_until SET STATISTICS -1,
    ALTER COLUMN retention_seconds SET STATISTICS -1,
    ALTER COLUMN provider_ref SET STATISTICS -1,
    ALTER COLUMN usage SET STATISTICS -1,
    ALTER COLUMN cost_micros SET STATISTICS -1,
    ALTER COLUMN created_at SET STATISTICS -1,
    ALTER COLUMN updated_at SET STATISTICS -1,
    ALTER COLUMN closed_at SET STATISTICS -1,
    ALTER COLUMN key_waits SET STATISTICS -1,
    ALTER COLUMN purged_at SET STATISTICS -1,
    ALTER COLUMN intent_seq SET STATISTICS -1,
    ALTER COLUMN api SET STATISTICS -1,
    ALTER COLUMN model SET STATISTICS -1,
    ALTER COLUMN stripe_account SET STATISTICS -1;
