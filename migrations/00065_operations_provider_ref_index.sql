-- +goose Up
-- A close by hand refuses a provider's record id that another operation of the same tenant
-- already holds. An operation closed by hand holds its record only on its own row
-- (operations.provider_ref): no attempt got it back and no charge names it, so this index
-- finds it, tenant first as the check asks. Operations that hold no record stay out of it.
CREATE INDEX operations_tenant_provider_ref_idx ON operations (tenant_id, provider, provider_ref) WHERE provider_ref <> '';

-- +goose Down
DROP INDEX operations_tenant_provider_ref_idx;
