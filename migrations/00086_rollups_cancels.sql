-- +goose Up
-- The duplicate rate counts duplicates of the requests that asked for a paid side effect:
-- every client request but those refused at the door and the cancels of what an operation
-- started (migration 00082), which ask for no paid call. The rollups already count the
-- refused ones (answered_rejected); this counts the cancels beside them, so /insights, the
-- reconciliation table and the alert rules take one denominator from the rollups.
ALTER TABLE rollups ADD COLUMN answered_cancel bigint NOT NULL DEFAULT 0;
-- Rows rolled up before this migration are given the cancels their requests still hold, at
-- each width, grouped as the counts group a request: by its tenant and kind, and the
-- provider and API of the operation it names ('' for none). A cancel the retention has
-- removed cannot be counted again, and its row keeps 0. Only the cancels are read: they
-- are few, and only rows that hold one are written.
UPDATE rollups r SET answered_cancel = c.n
FROM (
    SELECT w.width, date_bin(make_interval(secs => w.width), cr.received_at, '2000-01-01 00:00:00+00'::timestamptz) AS start,
        cr.tenant_id, cr.kind, coalesce(o.provider, '') AS provider, coalesce(o.api, '') AS api, count(*) AS n
    FROM client_requests cr LEFT JOIN operations o ON o.id = cr.operation_id
        CROSS JOIN (VALUES (60), (900), (3600)) AS w(width)
    WHERE cr.answer IN ('cancelled', 'cancel_too_late', 'cancel_failed', 'cancel_refused')
    GROUP BY 1, 2, 3, 4, 5, 6
) c
WHERE r.width_seconds = c.width AND r.start = c.start AND r.tenant_id = c.tenant_id AND r.kind = c.kind
    AND r.provider = c.provider AND r.api = c.api;

-- +goose Down
ALTER TABLE rollups DROP COLUMN answered_cancel;
