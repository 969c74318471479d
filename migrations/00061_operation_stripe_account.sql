-- +goose Up
-- The Stripe account an operation is sent to, read from its tenant's binding in the statement
-- that opens it: a connected account (acct_…), '' for the platform account, NULL for an
-- operation of another provider. Every attempt and lookup of the operation goes to that
-- account, and a record from it settles the operation even after the tenant has been moved
-- to another account: a refund that account fails later is still its own to fail.
-- Operations opened before this migration keep NULL and are read as before: in the account
-- their tenant is bound to now (moves are refused while a tenant has open operations, so
-- that is where any still open was sent). The value is copied from tenants.stripe_account,
-- which is checked there; a CHECK here would scan every operation under a lock to add it.
ALTER TABLE operations ADD COLUMN stripe_account text;

-- +goose Down
ALTER TABLE operations DROP COLUMN stripe_account;
