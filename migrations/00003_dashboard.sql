-- +goose Up
-- The audit page lists newest first by (at, id), alone or filtered by person, action or
-- entity; each filter gets an index in that order so a page never sorts or scans the log.
CREATE INDEX audit_log_at_idx ON audit_log (at, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, at, id);
CREATE INDEX audit_log_action_idx ON audit_log (action, at, id);
CREATE INDEX audit_log_entity_at_idx ON audit_log (entity_id, at, id);

-- +goose Down
DROP INDEX audit_log_entity_at_idx;
DROP INDEX audit_log_action_idx;
DROP INDEX audit_log_actor_idx;
DROP INDEX audit_log_at_idx;
