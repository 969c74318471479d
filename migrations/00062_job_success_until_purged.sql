-- +goose Up
-- One success per dedup key while its text is kept. The purge removes a finished generation's
-- prompt and completion; a generation purged so answers no job any more, so it no longer holds
-- its dedup key, and a job submitted afterwards generates anew under a new operation, once
-- (the index still allows one unpurged success). Without this a job after the purge failed
-- as result_unavailable under every key, and a new generation could not be recorded.
CREATE UNIQUE INDEX operations_job_one_kept_success_idx ON operations (intent_key)
    WHERE kind = 'llm_job' AND status = 'succeeded' AND purged_at IS NULL;
DROP INDEX operations_job_one_success_idx;

-- +goose Down
-- Fails while a dedup key has a purged success and a later one: drop the later first.
CREATE UNIQUE INDEX operations_job_one_success_idx ON operations (intent_key)
    WHERE kind = 'llm_job' AND status = 'succeeded';
DROP INDEX operations_job_one_kept_success_idx;
