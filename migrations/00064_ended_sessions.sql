-- +goose Up
-- An ended session (a sign-out, the old token of a sign-in, a disabled user's) is marked
-- ended rather than deleted, until it expires: a request of it still in flight when it
-- ended commits the session as it loaded it, and that commit must not sign the browser in
-- again. Only live sessions are found, listed and saved.
ALTER TABLE sessions ADD COLUMN ended boolean NOT NULL DEFAULT false;

-- +goose Down
DELETE FROM sessions WHERE ended;
ALTER TABLE sessions DROP COLUMN ended;
