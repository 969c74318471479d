-- +goose Up
-- The rollups count the requests refused because what was left of their tenant's LLM budget
-- of the day could not pay for their worst case (llm_budget_too_small), beside those refused
-- for a spent budget (refused_budget): a tenant whose every call asks more than is left is
-- stopped as surely, and the built-in rule that tells on-call of a budget's stop reads both
-- over its windows. Rows rolled up before this migration counted no such refusal, and keep 0;
-- a column with a constant default is added without rewriting the table.
ALTER TABLE rollups ADD COLUMN refused_too_small bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE rollups DROP COLUMN refused_too_small;
