-- +goose Up
-- Every insert under a foreign key into operations re-reads the operation at the end of its
-- statement and locks it (FOR KEY SHARE): a lock record and a key check per row, on the row
-- the same statement has just inserted or updated. A lifecycle's client requests, attempts,
-- evidence and charges now name their operation as the statements that write them check
-- it: each is written by the statement that inserts or updates its operation, or, for a
-- charge whose operation a provider names (a webhook, a lookup, the reconciliation), by one
-- that finds the operation and locks it as the key did, so a charge written while the
-- retention removes its operation names none; the retention removes these rows with their
-- operation. The keys of the rows written per event, exception, follow-up, proposal or job
-- stay.
SET LOCAL lock_timeout = '5s';
ALTER TABLE attempts DROP CONSTRAINT attempts_operation_id_fkey;
ALTER TABLE client_requests DROP CONSTRAINT client_requests_operation_id_fkey;
ALTER TABLE evidence DROP CONSTRAINT evidence_operation_id_fkey;
ALTER TABLE provider_charges DROP CONSTRAINT provider_charges_operation_id_fkey;

-- +goose Down
ALTER TABLE attempts ADD CONSTRAINT attempts_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES operations(id);
ALTER TABLE client_requests ADD CONSTRAINT client_requests_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES operations(id);
ALTER TABLE evidence ADD CONSTRAINT evidence_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES operations(id);
ALTER TABLE provider_charges ADD CONSTRAINT provider_charges_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES operations(id);
