-- +goose Up
-- An operation's close writes a new row version that every index takes an entry for (status is
-- indexed), but where the version is written still matters: on the old one's page the WAL
-- holds only the bytes that changed around the old version's unchanged head and tail (the
-- request comes before every column a close writes); a version that must go to another page is
-- logged whole, after a record that locks the old version while the page is let go (as does
-- one whose new version is compressed: a stream's events). An LLM call's row about doubles at
-- its close (its answer, and a stream's events): measured on a short chat completion, 517
-- bytes when opened and 973 (plain) to 1,288 (streamed) once closed, so the pages that
-- openings filled to the brim sent every close elsewhere: about 400 bytes more WAL and a lock
-- record per call. Filled to half at the openings, the page takes their closes: of 200 calls
-- opened and closed ten apart, half of them streamed, 183 closes stayed on their page (98
-- before), and the calls took as many pages (35), since the moved versions had filled pages of
-- their own. A refund's row grows less: its close stayed on its page before too (193 of 200
-- opened and closed one after another), and those refunds took 20 pages instead of 10, the
-- price of the room. Pages written from now on keep it; older ones keep their layout, and
-- setting it rewrites nothing (a lock that lets reads and writes go on).
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations SET (fillfactor = 50);

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations RESET (fillfactor);
