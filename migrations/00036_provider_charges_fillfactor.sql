-- +goose Up
-- The reconciler marks every charge a listing confirms (reconciled_at, which no index holds).
-- With room left on each page that mark is a heap-only update: the new row version stays on
-- its page and no index gets an entry; on full pages each mark moved the row and added five.
-- Pages written from now on keep half their space free; older ones keep their layout.
ALTER TABLE provider_charges SET (fillfactor = 50);

-- +goose Down
ALTER TABLE provider_charges RESET (fillfactor);
