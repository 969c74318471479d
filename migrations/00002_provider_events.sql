-- +goose Up
-- Every provider event (a Stripe webhook) is applied once: its id is recorded here first.
CREATE TABLE provider_events (
    provider     text NOT NULL,
    event_id     text NOT NULL,
    type         text NOT NULL,
    object_ref   text NOT NULL DEFAULT '',
    operation_id uuid REFERENCES operations(id),
    outcome      text NOT NULL DEFAULT '',
    payload      jsonb,
    received_at  timestamptz NOT NULL,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX provider_events_operation_idx ON provider_events (operation_id);
CREATE INDEX operations_payment_open_idx ON operations (tenant_id, payment_ref)
    WHERE payment_ref <> '' AND status IN ('received', 'in_progress', 'unknown', 'expired');

-- +goose Down
DROP INDEX operations_payment_open_idx;
DROP TABLE provider_events;
