-- +goose Up
-- Delivered events leave the outbox after a while (SETTLE_OUTBOX_KEEP); this finds them
-- without reading the table. Undelivered events are never deleted.
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

-- +goose Down
DROP INDEX outbox_published_idx;
