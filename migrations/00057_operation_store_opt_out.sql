-- +goose Up
-- Whether the client of an LLM call sent store: false, asking the provider to keep no copy
-- of it, as its request's body says. The body purge deletes that request a week or so after
-- the call, so the operation keeps the opt-out in a column of its own beside its API and
-- model (migrations 00048 and 00056), written when it is opened: a purged call that opted
-- out is still never looked up in the provider's store, nor said to be.
ALTER TABLE operations ADD COLUMN store_opted_out boolean NOT NULL DEFAULT false;
-- Existing operations take the opt-out their stored request's body names. One whose request
-- was purged already has lost it and keeps false.
UPDATE operations SET store_opted_out = true WHERE request->'body'->'store' = 'false'::jsonb;

-- +goose Down
ALTER TABLE operations DROP COLUMN store_opted_out;
