-- +goose Up
-- Every lifecycle writes two audit rows (open, then the attempt's end), and each row paid an
-- entry in six indexes. Two of them served the same lookup, by entity id: one index on
-- (entity_id, id) serves both the timeline of one entity (in id order, the entity checked on
-- the row) and the audit page filtered by entity id (a handful of rows, sorted). The action
-- index leaves out the two actions every lifecycle writes: a page of those is found at once
-- walking audit_log_at_idx, while the rare actions (a resolve, a lookup, a user added) keep
-- their index, which the audit page's query names by repeating its predicate.
CREATE INDEX audit_log_entity_id_idx ON audit_log (entity_id, id);
DROP INDEX audit_log_entity_idx;
DROP INDEX audit_log_entity_at_idx;
DROP INDEX audit_log_action_idx;
CREATE INDEX audit_log_rare_action_idx ON audit_log (action, at, id)
    WHERE action <> 'open' AND action NOT LIKE 'attempt.%';

-- +goose Down
DROP INDEX audit_log_rare_action_idx;
CREATE INDEX audit_log_action_idx ON audit_log (action, at, id);
CREATE INDEX audit_log_entity_at_idx ON audit_log (entity_id, at, id);
CREATE INDEX audit_log_entity_idx ON audit_log (entity, entity_id, id);
DROP INDEX audit_log_entity_id_idx;
