-- +goose Up
-- The finish of a successful attempt writes only columns no index of attempts holds: the
-- provider's id of the answer, and a call's usage record, go onto the operation only (see
-- transitionFin in ops/pg). It is then a heap-only update, with no new entry in any of the
-- attempts' indexes, when its new row version fits on the row's own page; a page filled to
-- the brim has no room for it. Measured on the ledger's rows: an attempt takes about 117
-- bytes when it starts and about 152 (a refund) to 170 (a call) once finished, so a page of
-- attempts grows by some 40 % as they finish. Filled to 70 %, the finished rows just fill
-- the page, and only if every old version was pruned at once; 60 % leaves a fifth of the
-- page for old versions that a running transaction still sees and for longer ids. Pages
-- written from now on keep that room; older ones keep their layout. Storage parameters
-- belong to each partition, not to the partitioned table: every partition takes it, and a
-- new month copies those of its table's default partition.
-- +goose StatementBegin
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'attempts'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 60)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_month_partition(parent text, col text, month timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz := date_trunc('month', month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    hi timestamptz := (date_trunc('month', month AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    part text := parent || '_' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM');
    opts text[];
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    -- Rows of the month that reached the default partition move into the new one first:
    -- attaching a month the default still holds rows of is refused. The new month takes the
    -- storage parameters of the default partition (attempts' fillfactor) before any row.
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
    SELECT c.reloptions INTO opts FROM pg_class c WHERE c.oid = to_regclass(parent || '_default');
    IF opts IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I SET (%s)', part, array_to_string(opts, ', '));
    END IF;
    EXECUTE format('WITH m AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM m',
        parent || '_default', col, col, part) USING lo, hi;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_month_partition(parent text, col text, month timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz := date_trunc('month', month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    hi timestamptz := (date_trunc('month', month AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    part text := parent || '_' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
    EXECUTE format('WITH m AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM m',
        parent || '_default', col, col, part) USING lo, hi;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'attempts'::regclass LOOP
        EXECUTE format('ALTER TABLE %s RESET (fillfactor)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd
