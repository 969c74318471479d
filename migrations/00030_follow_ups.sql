-- +goose Up
-- A follow-up is a person waiting to hear how an open operation ends ("Tell me when this
-- settles"): one per person and operation.
CREATE TABLE follow_ups (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id),
    operation_id uuid NOT NULL REFERENCES operations (id),
    created_at   timestamptz NOT NULL,
    -- Set, with the outcome, by the trigger below in the transaction that closes the operation.
    settled_at   timestamptz,
    outcome      text CHECK (outcome IN ('succeeded', 'failed')),
    read_at      timestamptz,
    UNIQUE (user_id, operation_id),
    CHECK ((settled_at IS NULL) = (outcome IS NULL))
);
-- The trigger finds an operation's follow-ups by it; the badge counts a person's unread ones.
CREATE INDEX follow_ups_operation_idx ON follow_ups (operation_id);
CREATE INDEX follow_ups_unread_idx ON follow_ups (user_id) WHERE settled_at IS NOT NULL AND read_at IS NULL;

-- The follow-ups' outbox: one row per settled follow-up and channel, so a webhook that fails
-- never makes the mail go twice. Same shape and hold as the operations' outbox.
CREATE TABLE follow_up_outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    channel      text NOT NULL CHECK (channel IN ('webhook', 'email')),
    follow_up_id bigint NOT NULL REFERENCES follow_ups (id),
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    published_at timestamptz,
    locked_until timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT ''
);
CREATE INDEX follow_up_outbox_unpublished_idx ON follow_up_outbox (channel, id) WHERE published_at IS NULL;

-- follow_ups_settle runs inside the statement that closes an operation, whichever path
-- closes it (a worker's attempt, a lookup, a webhook, the reconciler, the reaper, a person),
-- so the settled follow-ups and their notifications commit with the close or not at all. It
-- is a trigger rather than a part of each close statement because, as a volatile function,
-- its statements see a fresh snapshot: a follow-up whose insert (which holds a share lock on
-- the operation's row) made the close wait is settled too, where a part of the close
-- statement would read the snapshot taken before the wait and miss it. A refund that fails
-- after it succeeded settles its follow-ups again, as failed, unread.
-- +goose StatementBegin
CREATE FUNCTION follow_ups_settle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH s AS (
        UPDATE follow_ups f SET settled_at = NEW.updated_at, outcome = NEW.status, read_at = NULL
        WHERE f.operation_id = NEW.id AND (f.settled_at IS NULL OR f.outcome IS DISTINCT FROM NEW.status)
        RETURNING f.id, f.user_id
    ), e AS (
        SELECT gen_random_uuid() AS event_id, c.channel, s.id, s.user_id, u.email
        FROM s JOIN users u ON u.id = s.user_id CROSS JOIN (VALUES ('webhook'), ('email')) AS c (channel)
    )
    INSERT INTO follow_up_outbox (event_id, channel, follow_up_id, payload, created_at)
    SELECT e.event_id, e.channel, e.id, jsonb_build_object('event_id', e.event_id::text, 'follow_up_id', e.id,
        'operation_id', NEW.id::text, 'tenant_id', NEW.tenant_id, 'kind', NEW.kind, 'outcome', NEW.status,
        'previous_status', OLD.status, 'watcher_id', e.user_id, 'watcher_email', e.email,
        'settled_at', NEW.updated_at, 'closed_by', NEW.closed_by), NEW.updated_at
    FROM e;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER operations_follow_ups AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION follow_ups_settle();

-- +goose Down
DROP TRIGGER operations_follow_ups ON operations;
DROP FUNCTION follow_ups_settle();
DROP TABLE follow_up_outbox, follow_ups;
