-- +goose Up
-- The provider's id of what one attempt generated, recorded as soon as the provider names it
-- (the Responses API names its response in the first event of a stream), so that an attempt
-- whose answer was lost can still be looked up by that id. Empty when it is not known.
ALTER TABLE attempts ADD COLUMN provider_ref text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE attempts DROP COLUMN provider_ref;
