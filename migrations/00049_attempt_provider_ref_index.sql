-- +goose Up
-- A client reads a background response through Settle by its id (GET /v1/responses/{id}),
-- and Settle answers only the tenant whose operation recorded that id on one of its
-- attempts: this index finds the attempt by the provider's id without reading every
-- partition. Attempts that recorded none (most of them) stay out of it.
CREATE INDEX attempts_provider_ref_idx ON attempts (provider_ref) WHERE provider_ref <> '';

-- +goose Down
DROP INDEX attempts_provider_ref_idx;
