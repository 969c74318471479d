-- +goose Up
-- An attempt's finish by the process that sent it is audited on the attempt's own row, as an
-- operation's opening is on the operation: the attempt already holds the operation, the
-- process (owner), the time (finished_at) and the outcome (the action). What the audit
-- entry shows besides is kept here: the operation's status, version and phase after the
-- finish, the id the entry takes from audit_log's sequence (so it sorts among the
-- operation's audit rows as a row of its own would, and never equals one), and who finished
-- the attempt when that was not its owner (NULL otherwise). None is indexed: the finish stays
-- a heap-only update. They add 28 bytes to a finished row (a refund's 179 to 207 with a
-- 40-character request id, a call's 139 to 167; the version is an integer, and the 8-byte
-- id comes first, so that a single pad aligns both): the 37 started rows (127 bytes) that a page at fillfactor 60 (00072) takes
-- still fit once finished, with room for two old versions at the longest request ids.
-- Rows written before keep their audit rows and none of these columns.
ALTER TABLE attempts ADD COLUMN audit_id bigint, ADD COLUMN op_version integer, ADD COLUMN op_status text,
    ADD COLUMN op_phase text, ADD COLUMN finished_by text;

-- The finish names audit_log's sequence, which the recreations of the table (00031) left
-- with a generated name: it takes the table's plain one.
-- +goose StatementBegin
DO $$
DECLARE
    seq text := pg_get_serial_sequence('audit_log', 'id');
BEGIN
    IF seq IS DISTINCT FROM 'public.audit_log_id_seq' THEN
        EXECUTE format('ALTER SEQUENCE %s RENAME TO audit_log_id_seq', seq);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The entries go back into audit_log as the rows they stand for, with their ids.
INSERT INTO audit_log (id, at, actor, action, entity, entity_id, before, after, reason)
OVERRIDING SYSTEM VALUE
SELECT audit_id, finished_at, coalesce(finished_by, owner), 'attempt.' || outcome, 'operation', operation_id::text,
    jsonb_build_object('status', 'in_progress', 'version', op_version - 1),
    jsonb_build_object('status', op_status, 'version', op_version, 'phase', op_phase),
    CASE WHEN op_status IN ('succeeded', 'failed', 'unknown', 'expired') THEN 'attempt ' || outcome ELSE '' END
FROM attempts WHERE audit_id IS NOT NULL;
ALTER TABLE attempts DROP COLUMN audit_id, DROP COLUMN op_status, DROP COLUMN op_version,
    DROP COLUMN op_phase, DROP COLUMN finished_by;
