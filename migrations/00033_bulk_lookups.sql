-- +goose Up
-- A "look up everything matching" over a whole queue filter, run in the background: the
-- filter as it was at the start, the counts so far, a few of the operations left for a
-- person, and the cursor and lease that let another replica resume a run whose runner died.
CREATE TABLE bulk_lookups (
    id bigserial PRIMARY KEY,
    actor text NOT NULL,
    filter jsonb NOT NULL,
    filter_label text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'stopped', 'done')),
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    stopped_by text,
    total integer NOT NULL,
    done integer NOT NULL DEFAULT 0,
    closed integer NOT NULL DEFAULT 0,
    already_closed integer NOT NULL DEFAULT 0,
    need_person integer NOT NULL DEFAULT 0,
    reasons jsonb NOT NULL DEFAULT '{}',
    samples jsonb NOT NULL DEFAULT '[]',
    cursor_at timestamptz,
    cursor_id uuid,
    lease_owner text,
    lease_until timestamptz
);
CREATE INDEX bulk_lookups_running_idx ON bulk_lookups (started_at, id) WHERE state = 'running';

-- +goose Down
DROP TABLE bulk_lookups;
