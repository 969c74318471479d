package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// ResponseOperation implements llm.ResponseOwners: the LLM call of the tenant one of whose
// attempts recorded ref, the latest when several did.
func (db *DB) ResponseOperation(ctx context.Context, tenantID int64, ref string) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, `
SELECT a.operation_id::text FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.provider_ref = @ref AND a.provider_ref <> '' AND o.tenant_id = @tenant AND o.kind = 'llm_call'
ORDER BY a.started_at DESC LIMIT 1`, pgx.NamedArgs{"ref": ref, "tenant": tenantID}).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ops.Errorf(ops.ENOTFOUND, "No call of this tenant recorded %s.", ref)
	}
	return id, interpret(err, "find the operation of a response")
}
