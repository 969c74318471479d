-- +goose Up
-- A quarter-hour level (width 900) beside the minute and hour rollups: the insights page
-- draws 24 hours as 96 quarter-hour points, which read 21,600 minute rows per day at 15
-- groups and would read 1,440 quarter rows. Quarter rows are sums of their minute rows,
-- kept by the rollup job exactly as the hour rows are: replaced whenever one of their
-- minutes is, so running the job twice still changes nothing.
ALTER TABLE rollups DROP CONSTRAINT rollups_width_seconds_check,
    ADD CONSTRAINT rollups_width_seconds_check CHECK (width_seconds IN (60, 900, 3600));
ALTER TABLE rollup_money DROP CONSTRAINT rollup_money_width_seconds_check,
    ADD CONSTRAINT rollup_money_width_seconds_check CHECK (width_seconds IN (60, 900, 3600));

-- The quarters of the minutes computed so far, so the pages can read them at once rather
-- than after the job has recomputed the whole history.
INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, client_requests, duplicates, replays,
    answered_in_progress, answered_conflict, answered_checking, answered_rejected, operations, succeeded, failed,
    unknown, expired, attempts, attempts_sent, timeouts, charges, orphans, double_charges, computed_at)
SELECT 900, date_bin('15 minutes', start, '2000-01-01 00:00:00+00'::timestamptz), tenant_id, kind, provider,
    sum(client_requests), sum(duplicates), sum(replays), sum(answered_in_progress), sum(answered_conflict),
    sum(answered_checking), sum(answered_rejected), sum(operations), sum(succeeded), sum(failed), sum(unknown),
    sum(expired), sum(attempts), sum(attempts_sent), sum(timeouts), sum(charges), sum(orphans), sum(double_charges),
    max(computed_at)
FROM rollups WHERE width_seconds = 60
GROUP BY 2, 3, 4, 5;
INSERT INTO rollup_money (width_seconds, start, tenant_id, kind, provider, measure, currency, micros)
SELECT 900, date_bin('15 minutes', start, '2000-01-01 00:00:00+00'::timestamptz), tenant_id, kind, provider, measure, currency,
    sum(micros)
FROM rollup_money WHERE width_seconds = 60
GROUP BY 2, 3, 4, 5, 6, 7;

-- Every backlog snapshot writes one marker row (tenant 0, no kind or provider, n = 0). A
-- chart finds the last snapshot of each of its buckets from the markers alone, one index
-- entry per snapshot, instead of reading every group's row of every snapshot in the range.
CREATE INDEX backlog_snapshots_marker_idx ON backlog_snapshots (width_seconds, at)
    WHERE tenant_id = 0 AND kind = '' AND provider = '' AND status = 'unknown';

-- +goose Down
DROP INDEX backlog_snapshots_marker_idx;
DELETE FROM rollup_money WHERE width_seconds = 900;
DELETE FROM rollups WHERE width_seconds = 900;
ALTER TABLE rollups DROP CONSTRAINT rollups_width_seconds_check,
    ADD CONSTRAINT rollups_width_seconds_check CHECK (width_seconds IN (60, 3600));
ALTER TABLE rollup_money DROP CONSTRAINT rollup_money_width_seconds_check,
    ADD CONSTRAINT rollup_money_width_seconds_check CHECK (width_seconds IN (60, 3600));
