-- +goose Up
-- Settle's own id of the HTTP request that made each client request row (X-Request-Id, and
-- the request_id of every log line written while serving it), so an on-call engineer goes
-- from a log line to the operation and back. Empty for rows made before it was kept and for
-- work that no HTTP request started.
ALTER TABLE client_requests ADD COLUMN request_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE client_requests DROP COLUMN request_id;
