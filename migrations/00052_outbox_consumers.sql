-- +goose Up
-- Who consumes the operations' outbox events. A change writes its outbox event only when a
-- consumer is registered for the operation's tenant and kind: an event nobody receives would
-- stay undelivered, and so undeleted, for good. A NULL tenant or kind means every tenant or
-- every kind; a server with SETTLE_OUTBOX_URL registers itself for everything. A change made
-- while no consumer was registered has no event, and registering one later does not add it.
CREATE TABLE outbox_consumers (
    name          text PRIMARY KEY CHECK (name <> ''),
    tenant_id     bigint REFERENCES tenants(id) ON DELETE CASCADE,
    kind          text CHECK (kind <> ''),
    registered_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE outbox_consumers;
