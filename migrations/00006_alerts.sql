-- +goose Up
-- Alerts: the state of every alert instance, its history, and the outbox of notifications.

-- One row per lease: only the replica holding 'evaluator' evaluates. Unlike recon_leases
-- the holder renews its own lease every tick, so evaluation stays on one replica.
CREATE TABLE alert_leases (
    name        text PRIMARY KEY,
    owner       text NOT NULL,
    lease_until timestamptz NOT NULL
);

-- One row per alert instance (rule and label set) that is not inactive.
CREATE TABLE alert_instances (
    key          text PRIMARY KEY,
    rule_key     text NOT NULL,
    alert        text NOT NULL,
    labels       jsonb NOT NULL,
    annotations  jsonb NOT NULL DEFAULT '{}',
    state        text NOT NULL CHECK (state IN ('pending', 'firing', 'recovering')),
    value        double precision NOT NULL,
    active_at    timestamptz NOT NULL,
    fired_at     timestamptz,
    last_true_at timestamptz NOT NULL,
    since        timestamptz NOT NULL
);

-- The last evaluation of each rule: its health, so no data and errors never read as OK.
CREATE TABLE alert_rule_status (
    rule_key     text PRIMARY KEY,
    group_name   text NOT NULL,
    alert        text NOT NULL,
    health       text NOT NULL CHECK (health IN ('ok', 'no_data', 'error')),
    message      text NOT NULL DEFAULT '',
    value        double precision,
    evaluated_at timestamptz NOT NULL
);

-- Every state change of every instance.
CREATE TABLE alert_history (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL,
    rule_key     text NOT NULL,
    alert        text NOT NULL,
    instance_key text NOT NULL,
    labels       jsonb NOT NULL,
    from_state   text NOT NULL,
    to_state     text NOT NULL,
    value        double precision NOT NULL
);
CREATE INDEX alert_history_at_idx ON alert_history (at, id);

-- Ops rule 10 for alerts: a notification row per receiver, written in the same transaction as
-- the state change. It has its own table because the ledger's outbox has one relay that
-- sends every row to SETTLE_OUTBOX_URL; sharing it would let either relay take the other's
-- events. Rows of one receiver and instance are delivered in order.
CREATE TABLE alert_outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    receiver     text NOT NULL,
    alert_key    text NOT NULL,
    -- A resend repeats an unchanged firing alert; a newer row makes it pointless.
    resend       boolean NOT NULL DEFAULT false,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    published_at timestamptz,
    locked_until timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT ''
);
CREATE INDEX alert_outbox_unpublished_idx ON alert_outbox (id) WHERE published_at IS NULL;
CREATE INDEX alert_outbox_order_idx ON alert_outbox (receiver, alert_key, id) WHERE published_at IS NULL;
CREATE INDEX alert_outbox_published_idx ON alert_outbox (published_at) WHERE published_at IS NOT NULL;

-- /metrics counts rows by the time they were recorded; these keep each count on an index.
CREATE INDEX operations_closed_idx ON operations (closed_at) WHERE closed_at IS NOT NULL;
CREATE INDEX provider_charges_seen_idx ON provider_charges (seen_at);
-- The oldest unknown or expired operation of each tenant, kind and provider, one index probe each.
CREATE INDEX operations_open_age_idx ON operations (status, tenant_id, kind, provider, created_at)
    WHERE status IN ('unknown', 'expired');

-- +goose Down
DROP INDEX operations_open_age_idx;
DROP INDEX provider_charges_seen_idx;
DROP INDEX operations_closed_idx;
DROP TABLE alert_outbox, alert_history, alert_rule_status, alert_instances, alert_leases;
