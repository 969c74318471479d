-- +goose Up
-- Delivered job events leave their outbox after SETTLE_OUTBOX_KEEP, as the ledger's do.
-- A job is published once by its status (running → published), which pruning leaves alone.
CREATE INDEX job_outbox_published_idx ON job_outbox (published_at) WHERE published_at IS NOT NULL;

-- +goose Down
DROP INDEX job_outbox_published_idx;
