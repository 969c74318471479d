-- +goose Up
CREATE TABLE tenants (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    -- Whether LLM calls must carry an Idempotency-Key (the gateway's default is yes).
    require_idempotency_key boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    name         text NOT NULL DEFAULT '',
    -- SHA-256 of the token; the token itself is shown once and never stored.
    token_hash   bytea NOT NULL UNIQUE,
    prefix       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text NOT NULL,
    password_hash text NOT NULL,
    role          text NOT NULL CHECK (role IN ('support', 'oncall', 'manager', 'admin')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);
CREATE UNIQUE INDEX users_email_idx ON users (lower(email));

-- Sessions of the dashboard, in the shape scs's pgxstore expects.
CREATE TABLE sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

CREATE TABLE operations (
    id                  uuid PRIMARY KEY,
    tenant_id           bigint NOT NULL REFERENCES tenants(id),
    kind                text NOT NULL CHECK (kind IN ('refund', 'llm_call', 'llm_job')),
    provider            text NOT NULL,
    intent_key          text NOT NULL,
    provider_key        text NOT NULL UNIQUE,
    fingerprint         text NOT NULL,
    order_ref           text NOT NULL DEFAULT '',
    customer_ref        text NOT NULL DEFAULT '',
    chat_ref            text NOT NULL DEFAULT '',
    payment_ref         text NOT NULL DEFAULT '',
    amount_cents        bigint NOT NULL DEFAULT 0,
    currency            text NOT NULL DEFAULT '',
    request             jsonb,
    status              text NOT NULL CHECK (status IN ('received', 'in_progress', 'succeeded', 'failed', 'unknown', 'expired')),
    phase               text NOT NULL DEFAULT '' CHECK (phase IN ('', 'sending', 'sent_to_provider', 'first_token')),
    version             bigint NOT NULL DEFAULT 1,
    attempts            integer NOT NULL DEFAULT 0,
    lease_owner         text NOT NULL DEFAULT '',
    lease_until         timestamptz,
    first_sent_at       timestamptz,
    retry_until         timestamptz,
    retention_seconds   bigint NOT NULL DEFAULT 0,
    provider_ref        text NOT NULL DEFAULT '',
    provider_request_id text NOT NULL DEFAULT '',
    result              jsonb,
    usage               jsonb,
    cost_micros         bigint NOT NULL DEFAULT 0,
    duplicate_requests  integer NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    closed_at           timestamptz,
    closed_by           text NOT NULL DEFAULT '',
    CHECK ((status IN ('succeeded', 'failed')) = (closed_at IS NOT NULL))
);
-- Ops rule 2: at most one open operation per intent.
CREATE UNIQUE INDEX operations_open_intent_idx ON operations (tenant_id, kind, intent_key)
    WHERE status IN ('received', 'in_progress', 'unknown', 'expired');
-- The queues: open operations, oldest first, with keyset pagination.
CREATE INDEX operations_queue_idx ON operations (status, created_at, id)
    WHERE status IN ('received', 'in_progress', 'unknown', 'expired');
CREATE INDEX operations_stalled_idx ON operations (lease_until) WHERE status = 'in_progress';
CREATE INDEX operations_retry_until_idx ON operations (retry_until)
    WHERE status IN ('received', 'in_progress', 'unknown');
CREATE INDEX operations_order_idx ON operations (order_ref, created_at) WHERE order_ref <> '';
CREATE INDEX operations_customer_idx ON operations (customer_ref, created_at) WHERE customer_ref <> '';
CREATE INDEX operations_chat_idx ON operations (chat_ref, created_at) WHERE chat_ref <> '';
CREATE INDEX operations_intent_idx ON operations (tenant_id, kind, intent_key, created_at);

CREATE TABLE client_requests (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    operation_id uuid REFERENCES operations(id),
    kind         text NOT NULL,
    request_ref  text NOT NULL DEFAULT '',
    duplicate    boolean NOT NULL DEFAULT false,
    answer       text CHECK (answer IN ('new', 'replayed', 'in_progress', 'conflict', 'checking', 'retried', 'rejected')),
    received_at  timestamptz NOT NULL,
    answered_at  timestamptz
);
CREATE INDEX client_requests_operation_idx ON client_requests (operation_id);
CREATE INDEX client_requests_received_idx ON client_requests (received_at);

CREATE TABLE attempts (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id        uuid NOT NULL REFERENCES operations(id),
    n                   integer NOT NULL,
    provider_key        text NOT NULL,
    owner               text NOT NULL,
    started_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    outcome             text CHECK (outcome IN ('ok', 'timeout', 'rate_limited', 'key_in_use', 'server_error', 'invalid', 'not_sent')),
    http_status         integer NOT NULL DEFAULT 0,
    provider_request_id text NOT NULL DEFAULT '',
    error_code          text NOT NULL DEFAULT '',
    UNIQUE (operation_id, n)
);
CREATE INDEX attempts_started_idx ON attempts (started_at);

CREATE TABLE provider_charges (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    bigint REFERENCES tenants(id),
    provider     text NOT NULL,
    charge_ref   text NOT NULL,
    operation_id uuid REFERENCES operations(id),
    amount_cents bigint NOT NULL DEFAULT 0,
    currency     text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT '',
    raw          jsonb,
    charged_at   timestamptz NOT NULL,
    seen_at      timestamptz NOT NULL,
    UNIQUE (provider, charge_ref)
);
CREATE INDEX provider_charges_operation_idx ON provider_charges (operation_id);

CREATE TABLE evidence (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id uuid NOT NULL REFERENCES operations(id),
    kind         text NOT NULL CHECK (kind IN ('provider_response', 'lookup', 'webhook', 'reconciliation', 'note')),
    provider_ref text NOT NULL DEFAULT '',
    summary      text NOT NULL DEFAULT '',
    data         jsonb,
    recorded_by  text NOT NULL,
    recorded_at  timestamptz NOT NULL
);
CREATE INDEX evidence_operation_idx ON evidence (operation_id);

CREATE TABLE audit_log (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL,
    actor        text NOT NULL,
    action       text NOT NULL,
    entity       text NOT NULL,
    entity_id    text NOT NULL,
    before       jsonb,
    after        jsonb,
    reason       text NOT NULL DEFAULT '',
    evidence_id  bigint REFERENCES evidence(id)
);
CREATE INDEX audit_log_entity_idx ON audit_log (entity, entity_id, id);

-- Ops rule 10: events leave through this table, at least once, each with its own id.
CREATE TABLE outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    topic        text NOT NULL,
    entity_id    text NOT NULL,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    published_at timestamptz,
    -- A relay holds an event until then while it delivers it; a dead relay's hold runs out.
    locked_until timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT ''
);
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- Live counts of open operations for the queue tabs, kept by a trigger so the dashboard never
-- counts millions of rows. Each change lands in one of 16 shards to keep writers apart.
CREATE TABLE queue_counts (
    tenant_id bigint NOT NULL,
    kind      text NOT NULL,
    provider  text NOT NULL,
    status    text NOT NULL,
    shard     smallint NOT NULL,
    n         bigint NOT NULL,
    PRIMARY KEY (status, tenant_id, kind, provider, shard)
);

-- +goose StatementBegin
CREATE FUNCTION queue_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s smallint := (random() * 15)::smallint;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status IN ('received', 'in_progress', 'unknown', 'expired') THEN
        INSERT INTO queue_counts AS q VALUES (OLD.tenant_id, OLD.kind, OLD.provider, OLD.status, s, -1)
        ON CONFLICT (status, tenant_id, kind, provider, shard) DO UPDATE SET n = q.n - 1;
    END IF;
    IF NEW.status IN ('received', 'in_progress', 'unknown', 'expired') THEN
        INSERT INTO queue_counts AS q VALUES (NEW.tenant_id, NEW.kind, NEW.provider, NEW.status, s, 1)
        ON CONFLICT (status, tenant_id, kind, provider, shard) DO UPDATE SET n = q.n + 1;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER operations_queue_counts AFTER INSERT OR UPDATE OF status ON operations
    FOR EACH ROW EXECUTE FUNCTION queue_counts_track();

-- +goose Down
DROP TABLE queue_counts, outbox, audit_log, evidence, provider_charges, attempts, client_requests,
    operations, sessions, users, api_tokens, tenants;
DROP FUNCTION queue_counts_track();
