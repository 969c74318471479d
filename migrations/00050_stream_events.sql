-- +goose Up
-- The events of the stream that delivered an LLM operation's answer, as the gateway relayed
-- them ({"attempt": n, "events": [data, ...]}), so that a replay of its key sends the same
-- events with the same ids, byte for byte, instead of rebuilding a stream from the stored
-- answer. json, not jsonb: it keeps each event's text exactly as it was sent. A body like the
-- answer itself: written with it, deleted with it by the body purge. NULL when the answer did
-- not come from a stream, or was found by a lookup.
ALTER TABLE operations ADD COLUMN stream_events json;

-- +goose Down
ALTER TABLE operations DROP COLUMN stream_events;
