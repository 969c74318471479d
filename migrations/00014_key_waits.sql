-- +goose Up
-- A send the provider answered 409 (the key is still running a request) executed nothing:
-- it is recorded as an attempt, counted here, and left out of the operation's budget.
ALTER TABLE operations ADD COLUMN key_waits integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE operations DROP COLUMN key_waits;
