-- +goose Up
-- Every insert under a foreign key into tenants locks the tenant's row (FOR KEY SHARE): a
-- lock record, a multixact once two writers of one tenant overlap, and a key check per
-- row, on the one row every call of a tenant shares. Operations, their client requests and
-- their charges now name their tenant as the statements that write them check it: an
-- opening reads the tenant's row (and locks it only for a Stripe operation, which
-- SetStripeAccount relies on), a request or a charge of an operation copies its tenant,
-- and tenants are never deleted. The other tables' keys stay.
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations DROP CONSTRAINT operations_tenant_id_fkey;
ALTER TABLE client_requests DROP CONSTRAINT client_requests_tenant_id_fkey;
ALTER TABLE provider_charges DROP CONSTRAINT provider_charges_tenant_id_fkey;

-- +goose Down
ALTER TABLE operations ADD CONSTRAINT operations_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE client_requests ADD CONSTRAINT client_requests_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE provider_charges ADD CONSTRAINT provider_charges_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
