-- +goose Up
-- Named filters of the dashboard's pages, shared with everyone of a role and above. The
-- query is the page's own filter, checked by the page before it is saved.
CREATE TABLE saved_views (
    id bigserial PRIMARY KEY,
    page text NOT NULL CHECK (page IN ('ops', 'reconcile', 'exceptions')),
    name text NOT NULL,
    query text NOT NULL,
    role text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX saved_views_name_idx ON saved_views (page, lower(name));

-- +goose Down
DROP TABLE saved_views;
