-- +goose Up
-- Saved views are bounded (desk.MaxSavedViewName, desk.MaxSavedViewQuery): the dashboard
-- refuses a longer name or filter in words, and these checks keep any other writer to the
-- same bounds. They are NOT VALID: a view saved before the bounds is kept, and the
-- dashboard offers it as too long to open until its author or an admin deletes it.
ALTER TABLE saved_views
    ADD CONSTRAINT saved_views_name_length CHECK (char_length(name) <= 80) NOT VALID,
    ADD CONSTRAINT saved_views_query_length CHECK (octet_length(query) <= 1024) NOT VALID;
-- Each save counts its author's views on the page (desk.MaxSavedViewsPerUser).
CREATE INDEX saved_views_author_idx ON saved_views (page, created_by);

-- +goose Down
DROP INDEX saved_views_author_idx;
ALTER TABLE saved_views DROP CONSTRAINT saved_views_query_length, DROP CONSTRAINT saved_views_name_length;
