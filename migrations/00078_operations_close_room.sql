-- +goose Up
-- An operation's close writes a new row version that every index takes an entry for (status
-- is indexed), but where the version is written still matters: on the old one's page the
-- WAL holds only the bytes that changed around the old version's unchanged head and tail,
-- and the page-level lock needs no record; a version that must go to another page is logged
-- whole, after a lock record on the old one. An LLM call's row about doubles at its close
-- (its answer, and a stream's events): measured on a short chat completion, 517 bytes when
-- opened and 973 (plain) to 1,288 (streamed) once closed, so the pages that openings filled
-- to the brim sent every close elsewhere: about 400 bytes more WAL and a lock record per
-- call. Filled to half at the openings, the page takes their closes: in a run of 50 calls
-- opened and closed in turn, 46 closes stayed on their page (25 before), and the table took
-- as many pages, since the moved versions filled pages of their own. A refund's row grows
-- less and takes some more space. Pages written from now on keep that room; older ones keep
-- their layout, and setting it rewrites nothing (a lock that lets reads and writes go on).
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations SET (fillfactor = 50);

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations RESET (fillfactor);
