-- +goose Up
-- The follow-ups trigger (00030) ran its function at every close, though few operations are
-- followed: a close is a ledger write of every lifecycle. An operation now says whether
-- anyone follows it, and the trigger fires only for those. Following sets the flag with an
-- update of the operation's row, whose lock makes a close that runs at the same time wait
-- and then see the flag, as the share lock did before.
ALTER TABLE operations ADD COLUMN followed boolean NOT NULL DEFAULT false;
UPDATE operations o SET followed = true WHERE EXISTS (SELECT 1 FROM follow_ups f WHERE f.operation_id = o.id);
DROP TRIGGER operations_follow_ups ON operations;
CREATE TRIGGER operations_follow_ups AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (NEW.followed AND NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION follow_ups_settle();

-- +goose Down
DROP TRIGGER operations_follow_ups ON operations;
CREATE TRIGGER operations_follow_ups AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION follow_ups_settle();
ALTER TABLE operations DROP COLUMN followed;
