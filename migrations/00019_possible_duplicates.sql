-- +goose Up
-- /metrics counts LLM resends after an uncertain send (settle_llm_possible_duplicate_attempts_total)
-- and the alert rules their rate, by when they finished: the flag is written then.
CREATE INDEX attempts_possible_duplicate_idx ON attempts (finished_at) WHERE possible_duplicate;

-- +goose Down
DROP INDEX attempts_possible_duplicate_idx;
