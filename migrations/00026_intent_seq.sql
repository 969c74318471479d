-- +goose Up
-- Each operation of an intent gets the next number of that intent, and the number is unique.
-- The insert of a new operation reads the intent's newest operation in its statement's
-- snapshot; a concurrent request's operation committed after that snapshot, and already
-- closed (so outside the open-intent index), was invisible to it, and both inserted: two
-- operations, two refunds. Two inserts that read the same newest operation now take the same
-- number, and the unique index refuses the second against the latest committed state,
-- whatever its snapshot saw. The index also serves "the newest operation of this intent",
-- which the index on the intent and creation time served.
ALTER TABLE operations ADD COLUMN intent_seq integer;
UPDATE operations o SET intent_seq = s.n
FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id, kind, intent_key ORDER BY created_at, id) AS n
	FROM operations) s
WHERE s.id = o.id;
-- A row written without a number is its intent's first: a second such row of one intent is
-- refused by the unique index, never taken as a new intent.
ALTER TABLE operations ALTER COLUMN intent_seq SET NOT NULL, ALTER COLUMN intent_seq SET DEFAULT 1;
CREATE UNIQUE INDEX operations_intent_seq_idx ON operations (tenant_id, kind, intent_key, intent_seq);
DROP INDEX operations_intent_idx;

-- +goose Down
CREATE INDEX operations_intent_idx ON operations (tenant_id, kind, intent_key, created_at);
DROP INDEX operations_intent_seq_idx;
ALTER TABLE operations DROP COLUMN intent_seq;
