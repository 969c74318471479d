-- +goose Up
-- Reconciliation: what the providers billed compared with what Settle recorded.

-- The exception queue. One row per thing wrong, whatever number of reconciler runs saw it:
-- (kind, provider, ref) is what makes two findings the same exception. Every change of a
-- row writes an audit_log row (entity 'recon_exception') in the same statement.
CREATE TABLE recon_exceptions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('double_charge', 'orphan_charge', 'missing_charge',
                      'explained_unknown', 'charge_on_failed', 'usage_mismatch')),
    provider      text NOT NULL,
    -- ref names the exception within its kind: an operation id, a charge id, a usage bucket.
    ref           text NOT NULL,
    tenant_id     bigint REFERENCES tenants(id),
    operation_id  uuid REFERENCES operations(id),
    -- The provider's records involved (refund ids); grows when a later run sees another.
    charge_refs   text[] NOT NULL DEFAULT '{}',
    severity      text NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'critical')),
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'acknowledged', 'resolved')),
    assignee      text NOT NULL DEFAULT '',
    -- note is the last note given; each one is also kept in the audit log.
    note          text NOT NULL DEFAULT '',
    summary       text NOT NULL,
    amount_cents  bigint NOT NULL DEFAULT 0,
    currency      text NOT NULL DEFAULT '',
    details       jsonb,
    version       bigint NOT NULL DEFAULT 1,
    seen_count    integer NOT NULL DEFAULT 1,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    resolved_at   timestamptz,
    resolved_by   text NOT NULL DEFAULT '',
    UNIQUE (kind, provider, ref),
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL))
);
-- The queue page: one status, newest first, with keyset pages on id.
CREATE INDEX recon_exceptions_queue_idx ON recon_exceptions (status, id DESC);
CREATE INDEX recon_exceptions_operation_idx ON recon_exceptions (operation_id) WHERE operation_id IS NOT NULL;

-- One row per reconciler (per provider): the lease that lets only one replica act at a time,
-- and how far the background runs have got, so a failed run is simply done again.
CREATE TABLE recon_leases (
    name        text PRIMARY KEY,
    owner       text NOT NULL DEFAULT '',
    lease_until timestamptz,
    done_until  timestamptz,
    last_run_at timestamptz,
    last_report jsonb
);

-- An LLM provider's usage report as last read: billed requests per bucket, API key and model.
-- A later read of the same bucket replaces the numbers; it never adds a row.
CREATE TABLE llm_usage (
    provider       text NOT NULL,
    bucket_start   timestamptz NOT NULL,
    bucket_seconds integer NOT NULL CHECK (bucket_seconds > 0),
    api_key_id     text NOT NULL,
    model          text NOT NULL,
    requests       bigint NOT NULL,
    input_tokens   bigint NOT NULL DEFAULT 0,
    output_tokens  bigint NOT NULL DEFAULT 0,
    seen_at        timestamptz NOT NULL,
    PRIMARY KEY (provider, bucket_seconds, bucket_start, api_key_id, model)
);

-- When a reconciliation last saw the charge in the provider's own listing or lookup. A charge
-- recorded only from our attempt's response has none until then; an operation closed as
-- succeeded whose charge is never seen is a missing charge.
ALTER TABLE provider_charges ADD COLUMN reconciled_at timestamptz;

-- The per-window counts read rows by time; these keep every window query on an index.
CREATE INDEX operations_created_idx ON operations (created_at);
CREATE INDEX provider_charges_orphan_idx ON provider_charges (charged_at) WHERE operation_id IS NULL;
CREATE INDEX provider_charges_charged_idx ON provider_charges (provider, charged_at);

-- +goose Down
DROP INDEX provider_charges_charged_idx;
DROP INDEX provider_charges_orphan_idx;
DROP INDEX operations_created_idx;
ALTER TABLE provider_charges DROP COLUMN reconciled_at;
DROP TABLE llm_usage, recon_leases, recon_exceptions;
