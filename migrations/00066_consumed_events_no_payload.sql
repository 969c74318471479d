-- +goose Up
-- A receiver's inbox keeps the id of each event it applied, which applying it once needs, and
-- no copy of the event's body: a job's publish event carries the job's result, and an inbox
-- row outlives the body purge until the retention. Rows recorded before lose their copy here.
UPDATE consumed_events SET payload = NULL WHERE payload IS NOT NULL;

-- +goose Down
-- The copies are gone for good; nothing to restore.
SELECT 1;
