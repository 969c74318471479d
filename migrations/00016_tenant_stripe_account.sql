-- +goose Up
-- A tenant may be bound to a Stripe connected account: every Stripe call made for it carries
-- Stripe-Account, and a record or webhook from that account may change only its operations.
-- One account belongs to one tenant at most, or two tenants would refund each other's payments.
ALTER TABLE tenants ADD COLUMN stripe_account text
    CHECK (stripe_account ~ '^acct_[A-Za-z0-9]{1,250}$');
CREATE UNIQUE INDEX tenants_stripe_account_idx ON tenants (stripe_account) WHERE stripe_account IS NOT NULL;

-- +goose Down
DROP INDEX tenants_stripe_account_idx;
ALTER TABLE tenants DROP COLUMN stripe_account;
