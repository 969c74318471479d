-- +goose Up
-- The retention removes a follow-up's notifications with it, and removing a follow-up checks
-- that no notification still names it: without this index each of them would read the whole
-- follow-ups' outbox, where a channel left unset keeps every row it was ever given.
CREATE INDEX follow_up_outbox_follow_up_idx ON follow_up_outbox (follow_up_id);

-- +goose Down
DROP INDEX follow_up_outbox_follow_up_idx;
