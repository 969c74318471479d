-- +goose Up
-- Only unknown and expired need maintained counts: they can pile up to millions. Received and
-- in-progress rows are few (bounded by concurrency) and are counted from their partial
-- indexes, so the hot path of a lifecycle (in_progress → succeeded) fires no trigger at all.
DROP TRIGGER operations_queue_counts ON operations;
DELETE FROM queue_counts WHERE status IN ('received', 'in_progress');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION queue_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s smallint := (random() * 15)::smallint;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IN ('unknown', 'expired') THEN
        INSERT INTO queue_counts AS q VALUES (OLD.tenant_id, OLD.kind, OLD.provider, OLD.status, s, -1)
        ON CONFLICT (status, tenant_id, kind, provider, shard) DO UPDATE SET n = q.n - 1;
    END IF;
    IF NEW.status IN ('unknown', 'expired') THEN
        INSERT INTO queue_counts AS q VALUES (NEW.tenant_id, NEW.kind, NEW.provider, NEW.status, s, 1)
        ON CONFLICT (status, tenant_id, kind, provider, shard) DO UPDATE SET n = q.n + 1;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER operations_queue_counts_insert AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.status IN ('unknown', 'expired'))
    EXECUTE FUNCTION queue_counts_track();
CREATE TRIGGER operations_queue_counts_update AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
        AND (OLD.status IN ('unknown', 'expired') OR NEW.status IN ('unknown', 'expired')))
    EXECUTE FUNCTION queue_counts_track();
CREATE INDEX operations_received_idx ON operations (created_at) WHERE status = 'received';

-- +goose Down
DROP INDEX operations_received_idx;
DROP TRIGGER operations_queue_counts_insert ON operations;
DROP TRIGGER operations_queue_counts_update ON operations;
CREATE TRIGGER operations_queue_counts AFTER INSERT OR UPDATE OF status ON operations
    FOR EACH ROW EXECUTE FUNCTION queue_counts_track();
