-- +goose Up
-- Who consumes the jobs' job.published events (ops rule 10). A job writes its event into
-- job_outbox only when a consumer is registered for its tenant: an event nobody receives
-- would stay undelivered, and so undeleted with the job's result in it, for good. A NULL
-- tenant means every tenant; a server with SETTLE_JOB_WEBHOOK_URL registers itself for
-- everything. A job published while no consumer was registered has no event, and
-- registering one later does not add it. Kept apart from outbox_consumers, whose kind names
-- an operation kind: a job consumer there would need a kind no operation has, and a
-- consumer of every kind would silently take the jobs' events too.
CREATE TABLE job_event_consumers (
    name          text PRIMARY KEY CHECK (name <> ''),
    tenant_id     bigint REFERENCES tenants(id) ON DELETE CASCADE,
    registered_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE job_event_consumers;
