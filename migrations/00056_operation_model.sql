-- +goose Up
-- The model an LLM operation asked for, as its request's body names it. The body purge
-- deletes that request a week or so after the call, so the operation keeps its model in a
-- column of its own beside its API (migration 00048), written when it is opened: the
-- operation's page and queue row, and the usage comparison's per-model breakdown, still name
-- it after the purge. '' for an operation whose request names no model (a refund).
ALTER TABLE operations ADD COLUMN model text NOT NULL DEFAULT '';
-- Existing operations take the model their stored request's body names, where the gateway
-- and the pipeline jobs both keep it. One whose request was purged already has lost it and
-- keeps ''.
UPDATE operations SET model = request->'body'->>'model'
WHERE kind IN ('llm_call', 'llm_job') AND request->'body'->>'model' IS NOT NULL;

-- +goose Down
ALTER TABLE operations DROP COLUMN model;
