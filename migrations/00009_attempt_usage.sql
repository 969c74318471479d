-- +goose Up
-- Usage and cost per attempt: a timed-out LLM send may still be billed, and an extra send
-- after an uncertain one is a possible duplicate that reconciliation and alerts count.
ALTER TABLE attempts
    ADD COLUMN usage jsonb,
    ADD COLUMN cost_micros bigint,
    ADD COLUMN possible_duplicate boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE attempts DROP COLUMN usage, DROP COLUMN cost_micros, DROP COLUMN possible_duplicate;
