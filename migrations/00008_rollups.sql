-- +goose Up
-- Rollups: the counts of the reconciliation and insights pages per minute, so a page reads a
-- few thousand rollup rows instead of millions of raw ones. The rollup job (ops.Rollups)
-- recomputes whole minutes from the raw rows and replaces them; it never adds to a row, so
-- running it twice changes nothing. Hour rows are sums of their minute rows, replaced the
-- same way whenever one of their minutes is.

-- One row per minute (width 60) or hour (width 3600), tenant, kind and provider. Tenant 0,
-- kind '' and provider '' mean "none" (a charge naming no operation, a rejected request).
-- The definitions are those of ops.MetricsRow: requests, operations, attempts and orphan
-- charges by their own time; charges, succeeded and the other statuses by the minute their
-- operation was created (a cohort), so a charge sits beside the operation it pays for.
CREATE TABLE rollups (
    width_seconds        integer NOT NULL CHECK (width_seconds IN (60, 3600)),
    start                timestamptz NOT NULL,
    tenant_id            bigint NOT NULL,
    kind                 text NOT NULL,
    provider             text NOT NULL,
    client_requests      bigint NOT NULL DEFAULT 0,
    duplicates           bigint NOT NULL DEFAULT 0,
    replays              bigint NOT NULL DEFAULT 0,
    answered_in_progress bigint NOT NULL DEFAULT 0,
    answered_conflict    bigint NOT NULL DEFAULT 0,
    answered_checking    bigint NOT NULL DEFAULT 0,
    answered_rejected    bigint NOT NULL DEFAULT 0,
    operations           bigint NOT NULL DEFAULT 0,
    succeeded            bigint NOT NULL DEFAULT 0,
    failed               bigint NOT NULL DEFAULT 0,
    unknown              bigint NOT NULL DEFAULT 0,
    expired              bigint NOT NULL DEFAULT 0,
    attempts             bigint NOT NULL DEFAULT 0,
    attempts_sent        bigint NOT NULL DEFAULT 0,
    timeouts             bigint NOT NULL DEFAULT 0,
    charges              bigint NOT NULL DEFAULT 0,
    orphans              bigint NOT NULL DEFAULT 0,
    double_charges       bigint NOT NULL DEFAULT 0,
    computed_at          timestamptz NOT NULL,
    PRIMARY KEY (width_seconds, start, tenant_id, kind, provider)
);

-- Money per currency beside each rollup row, in micro-units (ops.Money): saved by replays
-- and lost to double charges.
CREATE TABLE rollup_money (
    width_seconds integer NOT NULL CHECK (width_seconds IN (60, 3600)),
    start         timestamptz NOT NULL,
    tenant_id     bigint NOT NULL,
    kind          text NOT NULL,
    provider      text NOT NULL,
    measure       text NOT NULL CHECK (measure IN ('saved', 'lost')),
    currency      text NOT NULL,
    micros        bigint NOT NULL,
    PRIMARY KEY (width_seconds, start, tenant_id, kind, provider, measure, currency)
);

-- How far the rollup job has got: every minute before minutes_until has been computed, and
-- changes to older rows were looked for up to changes_until. One row.
CREATE TABLE rollup_state (
    name          text PRIMARY KEY,
    minutes_until timestamptz NOT NULL,
    changes_until timestamptz NOT NULL,
    last_run_at   timestamptz NOT NULL,
    last_report   jsonb
);

-- The unknown and expired backlog as the rollup job saw it: one snapshot per minute (width
-- 60) and the last one of each hour (width 3600), per tenant, kind, provider and status.
-- A snapshot replaces every row of its (width, at); a group whose backlog emptied simply
-- has no row. Every snapshot also writes one row for tenant 0 with n = 0 and no oldest, so
-- "no backlog" and "no snapshot taken" read differently.
CREATE TABLE backlog_snapshots (
    width_seconds integer NOT NULL CHECK (width_seconds IN (60, 3600)),
    at            timestamptz NOT NULL,
    tenant_id     bigint NOT NULL,
    kind          text NOT NULL,
    provider      text NOT NULL,
    status        text NOT NULL CHECK (status IN ('unknown', 'expired')),
    n             bigint NOT NULL,
    oldest_at     timestamptz,
    taken_at      timestamptz NOT NULL,
    PRIMARY KEY (width_seconds, at, tenant_id, kind, provider, status)
);

-- The job finds changed rows by the time they were recorded. 00006 creates the same two
-- indexes for /metrics; IF NOT EXISTS keeps one of each whichever migration comes first.
CREATE INDEX IF NOT EXISTS provider_charges_seen_idx ON provider_charges (seen_at);
CREATE INDEX IF NOT EXISTS operations_open_age_idx ON operations (status, tenant_id, kind, provider, created_at)
    WHERE status IN ('unknown', 'expired');

-- +goose Down
DROP TABLE backlog_snapshots, rollup_state, rollup_money, rollups;
