-- +goose Up
-- Finishing an attempt writes its finished_at, outcome and usage. The possible-duplicate
-- index held finished_at, so every finish was a new row version with an entry in each of the
-- attempts' indexes. Keyed on started_at, which a finish never changes, it lets a finish
-- stay on its page as a heap-only update (a finish that flags a possible duplicate, rare,
-- still changes an indexed column). The counts by finish time read it with started_at
-- before the window's end: an attempt starts before it finishes.
CREATE INDEX attempts_possible_duplicate_started_idx ON attempts (started_at) WHERE possible_duplicate;
DROP INDEX attempts_possible_duplicate_idx;

-- +goose Down
CREATE INDEX attempts_possible_duplicate_idx ON attempts (finished_at) WHERE possible_duplicate;
DROP INDEX attempts_possible_duplicate_started_idx;
