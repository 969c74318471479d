-- +goose Up
-- Autovacuum visits the ledger's busiest tables about once a minute while they are young
-- (their thresholds are a share of their size), and at a steady rate of calls each visit
-- vacuums and analyzes operations, its attempts, client requests and charges in one go: on
-- two cores under 300 calls a second that was 0.5 s of CPU and 2.5 MB of WAL in about a
-- second, and the calls of that second waited for it (up to half of a run's slow calls).
-- The cost-based delay lets a worker do 200 units of page work (a page read from the
-- buffers costs 1, a page it dirties 20) and then sleep; the server's default sleep of 2 ms
-- lets it run nearly flat out on a small table. 20 ms spreads the same work over several
-- seconds in slices of a few milliseconds, and a sampled ANALYZE reads its pages through
-- the same delay. A vacuum of a very large table takes longer in turn (about two minutes
-- per million pages it only reads); a DBA may set another value per table, as here.
-- Storage parameters belong to each partition, not to the partitioned table, and a new
-- month takes those of its table's default partition (settle_month_partition).
ALTER TABLE operations SET (autovacuum_vacuum_cost_delay = 20);
ALTER TABLE provider_charges SET (autovacuum_vacuum_cost_delay = 20);
ALTER TABLE evidence SET (autovacuum_vacuum_cost_delay = 20);
ALTER TABLE outbox SET (autovacuum_vacuum_cost_delay = 20);
-- +goose StatementBegin
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits
        WHERE inhparent IN ('attempts'::regclass, 'client_requests'::regclass, 'audit_log'::regclass) LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_vacuum_cost_delay = 20)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE operations RESET (autovacuum_vacuum_cost_delay);
ALTER TABLE provider_charges RESET (autovacuum_vacuum_cost_delay);
ALTER TABLE evidence RESET (autovacuum_vacuum_cost_delay);
ALTER TABLE outbox RESET (autovacuum_vacuum_cost_delay);
-- +goose StatementBegin
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits
        WHERE inhparent IN ('attempts'::regclass, 'client_requests'::regclass, 'audit_log'::regclass) LOOP
        EXECUTE format('ALTER TABLE %s RESET (autovacuum_vacuum_cost_delay)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd
