-- +goose NO TRANSACTION
-- +goose Up
-- A client's cancel of what an operation started (POST /v1/responses/{id}/cancel) is one of
-- its requests (ops rule 8), recorded on the operation it names, or on none when it is
-- refused before naming one of the tenant's. It is neither a new intent nor a duplicate of
-- one, so it has answers of its own: cancelled, cancel_too_late (what it names had ended),
-- cancel_failed (the provider could not be asked, or its answer read) and cancel_refused.
-- The new check allows every answer the old one did, so no row can fail it: it is added
-- NOT VALID beside the old one, which takes the table's lock for a moment only, the old one
-- (named by Postgres when the table was partitioned) is dropped, and the new one validated,
-- reading the rows without blocking writes.
ALTER TABLE client_requests ADD CONSTRAINT client_requests_answer_known CHECK (answer IN ('new', 'replayed',
    'in_progress', 'conflict', 'checking', 'retried', 'rejected', 'cancelled', 'cancel_too_late', 'cancel_failed',
    'cancel_refused')) NOT VALID;
-- +goose StatementBegin
DO $$
DECLARE
    c name;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'client_requests'::regclass AND contype = 'c'
        AND conname <> 'client_requests_answer_known' AND pg_get_constraintdef(oid) LIKE '%answer%' LOOP
        EXECUTE format('ALTER TABLE client_requests DROP CONSTRAINT %I', c);
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER TABLE client_requests VALIDATE CONSTRAINT client_requests_answer_known;

-- +goose Down
-- The old check knows no cancel: a refused cancel becomes a refused request, and the others
-- unanswered ones, which is what the old answers can say of them.
UPDATE client_requests SET answer = CASE answer WHEN 'cancel_refused' THEN 'rejected' END
WHERE answer IN ('cancelled', 'cancel_too_late', 'cancel_failed', 'cancel_refused');
ALTER TABLE client_requests ADD CONSTRAINT client_requests_answer_check CHECK (answer IN ('new', 'replayed',
    'in_progress', 'conflict', 'checking', 'retried', 'rejected')) NOT VALID;
ALTER TABLE client_requests DROP CONSTRAINT client_requests_answer_known;
ALTER TABLE client_requests VALIDATE CONSTRAINT client_requests_answer_check;
