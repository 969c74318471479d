-- +goose Up
-- A user's session generation counts the times all their sessions were ended (a disable). A
-- session keeps the generation it was signed in under and is refused under any other, so a
-- session a request wrote back after the disable, while it was in flight, stays ended when the
-- account is enabled again. Sessions signed in before this migration hold no generation, read
-- as 0, and keep working.
ALTER TABLE users ADD COLUMN session_generation bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE users DROP COLUMN session_generation;
