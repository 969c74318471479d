-- +goose Up
-- A refused client request records why it was refused: ops rule 8 counts every refusal, and
-- the built-in alert rules, which read the ledger rather than Prometheus, must tell a tenant
-- whose LLM budget of the day is spent (its customers stopped until midnight UTC) from
-- malformed requests. The reason is the refusal's stable code (its ops.Error Reason, else
-- its Code: tenant_budget_spent, model_not_priced, ...). It is a column of the row the
-- refusal already writes, set by the same statement, so a refusal costs no extra statement;
-- it is NULL on every other request, and a nullable column without a default is added
-- without rewriting the table. It has no index: the counts read refused requests by the
-- time they were received, through the indexes they use today, and nothing looks a request
-- up by its reason.
ALTER TABLE client_requests ADD COLUMN reason text;
-- The rollups count the requests refused because their tenant's LLM budget was spent, beside
-- all the refused ones (answered_rejected), for the alert rules' windows. Rows rolled up
-- before this migration had no reason to count, and keep 0.
ALTER TABLE rollups ADD COLUMN refused_budget bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE rollups DROP COLUMN refused_budget;
ALTER TABLE client_requests DROP COLUMN reason;
