-- +goose Up
-- An operation carries the policy it was opened with (ops.Policy): whether an attempt whose
-- outcome is uncertain may be sent again, whether its provider takes no idempotency key (a
-- resend may run twice), and whether the provider can be asked what became of it (a failed
-- close after an uncertain attempt then needs a lookup). Every process that sends, reaps or
-- closes the operation reads them from its row, so a tenant's or a deployment's setting at
-- the time of the intent holds for its whole life. A row written without them gets the
-- cautious values: no resend, counted as a possible duplicate, a lookup before failing.
ALTER TABLE operations
    ADD COLUMN retry_uncertain boolean NOT NULL DEFAULT false,
    ADD COLUMN no_provider_key boolean NOT NULL DEFAULT true,
    ADD COLUMN has_lookup boolean NOT NULL DEFAULT true;
-- The rows before this migration take the policies the code applied to them: Stripe
-- refunds are resent with their key and looked up; an LLM call follows the policy stored
-- with its request (interactive, the default, resends and counts a possible duplicate;
-- batch does not resend); a pipeline job's generation is not resent (the jobs' default).
UPDATE operations SET
    retry_uncertain = CASE kind
        WHEN 'refund' THEN true
        WHEN 'llm_call' THEN coalesce(request->>'policy', '') <> 'batch'
        ELSE false END,
    no_provider_key = kind <> 'refund',
    has_lookup = kind = 'refund';

-- +goose Down
ALTER TABLE operations DROP COLUMN has_lookup, DROP COLUMN no_provider_key, DROP COLUMN retry_uncertain;
