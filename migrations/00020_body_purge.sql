-- +goose Up
-- Prompts and completions are not kept for good. Past the key's TTL and SETTLE_LLM_BODY_KEEP
-- the purge deletes an LLM operation's request and result, and a finished job's document
-- and result, and stamps purged_at: the rows, their usage and fingerprints stay, and a
-- replay tells an answer no longer kept from one never stored.
ALTER TABLE operations ADD COLUMN purged_at timestamptz;
ALTER TABLE jobs ADD COLUMN purged_at timestamptz;
-- What the purge looks through, oldest first; a purged row leaves the index.
CREATE INDEX operations_body_purge_idx ON operations (created_at)
    WHERE purged_at IS NULL AND kind IN ('llm_call', 'llm_job');
CREATE INDEX jobs_body_purge_idx ON jobs (created_at)
    WHERE purged_at IS NULL AND status IN ('published', 'failed');

-- +goose Down
DROP INDEX jobs_body_purge_idx;
DROP INDEX operations_body_purge_idx;
ALTER TABLE jobs DROP COLUMN purged_at;
ALTER TABLE operations DROP COLUMN purged_at;
