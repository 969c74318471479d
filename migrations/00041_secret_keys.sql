-- +goose Up
-- Random keys that every server of a deployment shares through the database, each created
-- by the first server that needs it. Single sign-on seals the sign-in in progress into the
-- browser's cookie with one, so that nothing is stored for a visitor before the provider
-- answers, and a sign-in started on one server may finish on another.
CREATE TABLE secret_keys (
    name text PRIMARY KEY,
    key bytea NOT NULL CHECK (octet_length(key) >= 32),
    created_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE secret_keys;
