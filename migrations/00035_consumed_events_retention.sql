-- +goose Up
-- The retention removes a receiver's inbox rows older than SETTLE_RETENTION a batch at a time;
-- without this index each batch would read the whole inbox to find them.
CREATE INDEX consumed_events_applied_idx ON consumed_events (applied_at);

-- +goose Down
DROP INDEX consumed_events_applied_idx;
