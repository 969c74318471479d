-- +goose Up
-- A refund the provider accepted (pending) that failed later is an exception of its own.
ALTER TABLE recon_exceptions DROP CONSTRAINT recon_exceptions_kind_check;
ALTER TABLE recon_exceptions ADD CONSTRAINT recon_exceptions_kind_check CHECK (kind IN ('double_charge',
    'orphan_charge', 'missing_charge', 'explained_unknown', 'charge_on_failed', 'usage_mismatch', 'failed_after_success'));

-- +goose Down
ALTER TABLE recon_exceptions DROP CONSTRAINT recon_exceptions_kind_check;
ALTER TABLE recon_exceptions ADD CONSTRAINT recon_exceptions_kind_check CHECK (kind IN ('double_charge',
    'orphan_charge', 'missing_charge', 'explained_unknown', 'charge_on_failed', 'usage_mismatch'));
