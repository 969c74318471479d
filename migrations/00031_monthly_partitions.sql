-- +goose Up
-- Client requests, attempts and the audit log grow with every request for as long as Settle
-- runs. Each is partitioned by month on its timestamp (received_at, started_at, at), so the
-- retention (SETTLE_RETENTION) returns a month's disk by dropping its emptied partition
-- instead of leaving years of dead rows to vacuum. Their rows are written once and only ever
-- completed afterwards (an attempt's outcome, a request's answer): the timestamp that picks
-- the partition never changes. The outboxes are left alone: they are not append-only (a
-- delivery updates every row, pruning deletes delivered rows after SETTLE_OUTBOX_KEEP), so
-- they stay small without partitions, and job_outbox's one-publish-per-job index stays exact.
--
-- Postgres requires every unique index of a partitioned table to hold the partition column:
-- the primary keys become (id, timestamp), and id stays unique because it comes from the
-- table's one identity sequence. attempts' UNIQUE (operation_id, n) cannot stay global; see
-- the comment on attempts_operation_idx below for what keeps it exact.
--
-- Months are created ahead (this month and the next two) here, at every start and by the
-- retention role, through settle_month_partition; a row outside every month lands in the
-- default partition, and creating its month later moves it out.

-- +goose StatementBegin
CREATE FUNCTION settle_month_partition(parent text, col text, month timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz := date_trunc('month', month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    hi timestamptz := (date_trunc('month', month AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    part text := parent || '_' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    -- Rows of the month that reached the default partition move into the new one first:
    -- attaching a month the default still holds rows of is refused.
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
    EXECUTE format('WITH m AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM m',
        parent || '_default', col, col, part) USING lo, hi;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- settle_month_partitions creates the months of every partitioned table from the month of
-- from to the month of upto, and returns how many it created.
-- +goose StatementBegin
CREATE FUNCTION settle_month_partitions(from_at timestamptz, upto timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    m timestamptz;
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES ('client_requests', 'received_at'), ('attempts', 'started_at'), ('audit_log', 'at')) v(parent, col) LOOP
        FOR m IN SELECT generate_series(date_trunc('month', from_at AT TIME ZONE 'UTC'),
                date_trunc('month', upto AT TIME ZONE 'UTC'), interval '1 month') AT TIME ZONE 'UTC' LOOP
            IF settle_month_partition(t.parent, t.col, m) THEN
                n := n + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- client_requests
ALTER TABLE client_requests RENAME TO client_requests_unpartitioned;
CREATE TABLE client_requests (
    id           bigint GENERATED ALWAYS AS IDENTITY,
    tenant_id    bigint NOT NULL,
    operation_id uuid,
    kind         text NOT NULL,
    request_ref  text NOT NULL DEFAULT '',
    duplicate    boolean NOT NULL DEFAULT false,
    answer       text CHECK (answer IN ('new', 'replayed', 'in_progress', 'conflict', 'checking', 'retried', 'rejected')),
    received_at  timestamptz NOT NULL,
    answered_at  timestamptz,
    request_id   text NOT NULL DEFAULT ''
) PARTITION BY RANGE (received_at);
CREATE TABLE client_requests_default PARTITION OF client_requests DEFAULT;

-- attempts
ALTER TABLE attempts RENAME TO attempts_unpartitioned;
CREATE TABLE attempts (
    id                  bigint GENERATED ALWAYS AS IDENTITY,
    operation_id        uuid NOT NULL,
    n                   integer NOT NULL,
    provider_key        text NOT NULL,
    owner               text NOT NULL,
    started_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    outcome             text CHECK (outcome IN ('ok', 'timeout', 'rate_limited', 'key_in_use', 'server_error', 'invalid', 'not_sent')),
    http_status         integer NOT NULL DEFAULT 0,
    provider_request_id text NOT NULL DEFAULT '',
    error_code          text NOT NULL DEFAULT '',
    usage               jsonb,
    cost_micros         bigint,
    possible_duplicate  boolean NOT NULL DEFAULT false
) PARTITION BY RANGE (started_at);
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;

-- audit_log
ALTER TABLE audit_log RENAME TO audit_log_unpartitioned;
CREATE TABLE audit_log (
    id           bigint GENERATED ALWAYS AS IDENTITY,
    at           timestamptz NOT NULL,
    actor        text NOT NULL,
    action       text NOT NULL,
    entity       text NOT NULL,
    entity_id    text NOT NULL,
    before       jsonb,
    after        jsonb,
    reason       text NOT NULL DEFAULT '',
    evidence_id  bigint
) PARTITION BY RANGE (at);
CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;

-- The months of the rows already there, and the next two.
SELECT settle_month_partitions(least(
    (SELECT min(received_at) FROM client_requests_unpartitioned),
    (SELECT min(started_at) FROM attempts_unpartitioned),
    (SELECT min(at) FROM audit_log_unpartitioned), now()), now() + interval '2 months');

-- The rows move with their ids; each sequence then goes on after the largest.
INSERT INTO client_requests OVERRIDING SYSTEM VALUE SELECT id, tenant_id, operation_id, kind, request_ref, duplicate,
    answer, received_at, answered_at, request_id FROM client_requests_unpartitioned;
INSERT INTO attempts OVERRIDING SYSTEM VALUE SELECT id, operation_id, n, provider_key, owner, started_at, finished_at,
    outcome, http_status, provider_request_id, error_code, usage, cost_micros, possible_duplicate FROM attempts_unpartitioned;
INSERT INTO audit_log OVERRIDING SYSTEM VALUE SELECT id, at, actor, action, entity, entity_id, before, after, reason,
    evidence_id FROM audit_log_unpartitioned;
SELECT setval(pg_get_serial_sequence('client_requests', 'id'), coalesce((SELECT max(id) FROM client_requests), 0) + 1, false);
SELECT setval(pg_get_serial_sequence('attempts', 'id'), coalesce((SELECT max(id) FROM attempts), 0) + 1, false);
SELECT setval(pg_get_serial_sequence('audit_log', 'id'), coalesce((SELECT max(id) FROM audit_log), 0) + 1, false);
DROP TABLE client_requests_unpartitioned, attempts_unpartitioned, audit_log_unpartitioned;

-- Keys, references and indexes, under their old names; each partition gets its own.
ALTER TABLE client_requests ADD PRIMARY KEY (id, received_at),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants(id),
    ADD FOREIGN KEY (operation_id) REFERENCES operations(id);
CREATE INDEX client_requests_operation_idx ON client_requests (operation_id);
CREATE INDEX client_requests_received_idx ON client_requests (received_at);

ALTER TABLE attempts ADD PRIMARY KEY (id, started_at),
    ADD FOREIGN KEY (operation_id) REFERENCES operations(id);
-- Was UNIQUE (operation_id, n), which a partitioned table can only enforce with started_at in
-- it, and then no longer per operation. Nothing relied on the index to refuse a duplicate:
-- the only writers of an attempt derive n from the operation's row in the same statement
-- (Open inserts n = 1 with a new operation; BeginAttempt inserts n = attempts + 1 from the
-- compare-and-set on the operation's version and lease), so two attempts of one operation
-- with one n would need two winners of one compare-and-set. TestAttemptNumbersStayUniqueWithoutTheIndex
-- (ops/pg) races BeginAttempt from one version and checks it.
CREATE INDEX attempts_operation_idx ON attempts (operation_id, n);
CREATE INDEX attempts_started_idx ON attempts (started_at);
CREATE INDEX attempts_possible_duplicate_idx ON attempts (finished_at) WHERE possible_duplicate;

ALTER TABLE audit_log ADD PRIMARY KEY (id, at),
    ADD FOREIGN KEY (evidence_id) REFERENCES evidence(id);
CREATE INDEX audit_log_at_idx ON audit_log (at, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, at, id);
CREATE INDEX audit_log_entity_id_idx ON audit_log (entity_id, id);
CREATE INDEX audit_log_rare_action_idx ON audit_log (action, at, id)
    WHERE action <> 'open' AND action NOT LIKE 'attempt.%';
-- Deleting evidence checks that no audit row names it: without this, one scan of the whole
-- log per evidence row the retention removes.
CREATE INDEX audit_log_evidence_idx ON audit_log (evidence_id) WHERE evidence_id IS NOT NULL;

-- +goose Down
-- Back to plain tables, rows kept.
ALTER TABLE client_requests RENAME TO client_requests_partitioned;
CREATE TABLE client_requests (LIKE client_requests_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY);
INSERT INTO client_requests OVERRIDING SYSTEM VALUE SELECT * FROM client_requests_partitioned;
SELECT setval(pg_get_serial_sequence('client_requests', 'id'), coalesce((SELECT max(id) FROM client_requests), 0) + 1, false);
DROP TABLE client_requests_partitioned;
ALTER TABLE client_requests ADD PRIMARY KEY (id), ADD FOREIGN KEY (tenant_id) REFERENCES tenants(id),
    ADD FOREIGN KEY (operation_id) REFERENCES operations(id);
CREATE INDEX client_requests_operation_idx ON client_requests (operation_id);
CREATE INDEX client_requests_received_idx ON client_requests (received_at);

ALTER TABLE attempts RENAME TO attempts_partitioned;
CREATE TABLE attempts (LIKE attempts_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY);
INSERT INTO attempts OVERRIDING SYSTEM VALUE SELECT * FROM attempts_partitioned;
SELECT setval(pg_get_serial_sequence('attempts', 'id'), coalesce((SELECT max(id) FROM attempts), 0) + 1, false);
DROP TABLE attempts_partitioned;
ALTER TABLE attempts ADD PRIMARY KEY (id), ADD FOREIGN KEY (operation_id) REFERENCES operations(id),
    ADD UNIQUE (operation_id, n);
CREATE INDEX attempts_started_idx ON attempts (started_at);
CREATE INDEX attempts_possible_duplicate_idx ON attempts (finished_at) WHERE possible_duplicate;

ALTER TABLE audit_log RENAME TO audit_log_partitioned;
CREATE TABLE audit_log (LIKE audit_log_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY);
INSERT INTO audit_log OVERRIDING SYSTEM VALUE SELECT * FROM audit_log_partitioned;
SELECT setval(pg_get_serial_sequence('audit_log', 'id'), coalesce((SELECT max(id) FROM audit_log), 0) + 1, false);
DROP TABLE audit_log_partitioned;
ALTER TABLE audit_log ADD PRIMARY KEY (id), ADD FOREIGN KEY (evidence_id) REFERENCES evidence(id);
CREATE INDEX audit_log_at_idx ON audit_log (at, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, at, id);
CREATE INDEX audit_log_entity_id_idx ON audit_log (entity_id, id);
CREATE INDEX audit_log_rare_action_idx ON audit_log (action, at, id)
    WHERE action <> 'open' AND action NOT LIKE 'attempt.%';

DROP FUNCTION settle_month_partitions(timestamptz, timestamptz);
DROP FUNCTION settle_month_partition(text, text, timestamptz);
