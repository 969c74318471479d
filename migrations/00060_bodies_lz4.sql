-- +goose Up
-- The bodies an operation keeps (its request, its answer and the events of the stream that
-- delivered it) are compressed with lz4 instead of the default pglz when Postgres moves them
-- out of the row: a streamed chat completion's events are some 5 kB, so every streamed call
-- compressed them, and pglz spent about 40 µs more of the server's CPU on each than lz4 for
-- the same size. Only values written from now on change; older ones are read as they are.
-- A server built without lz4 refuses the method, and keeps pglz.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE 'ALTER TABLE operations ALTER COLUMN request SET COMPRESSION lz4, '
        'ALTER COLUMN result SET COMPRESSION lz4, ALTER COLUMN stream_events SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available on this server: the bodies stay compressed with pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE 'ALTER TABLE operations ALTER COLUMN request SET COMPRESSION default, '
        'ALTER COLUMN result SET COMPRESSION default, ALTER COLUMN stream_events SET COMPRESSION default';
EXCEPTION WHEN syntax_error THEN
    -- A server too old to name a column's compression never changed it.
    NULL;
END
$$;
-- +goose StatementEnd
