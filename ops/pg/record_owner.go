package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// recordOwnerSQL finds an operation that holds a provider's record, on the three indexes that
// name records: provider_charges (provider, charge_ref), where the close of a successful
// attempt writes the record of its answer with the operation; attempts (provider_ref), which
// hold an id the provider named before it answered (a stream's first event; since migration
// 00072 the answer's id is left off the attempt's row, see transitionFin); and the
// operations of except's tenant (tenant_id, provider, provider_ref, migration 00065), where
// every close as succeeded writes its record and a close by hand writes it nowhere else. A charge
// that names no operation (an orphan, such as a refund made by hand at the provider)
// belongs to nobody.
const recordOwnerSQL = `
SELECT owner::text FROM (
	SELECT c.operation_id AS owner FROM provider_charges c
	WHERE c.provider = @provider AND c.charge_ref = @ref AND c.operation_id IS NOT NULL AND c.operation_id IS DISTINCT FROM @except::uuid
	UNION ALL
	SELECT a.operation_id FROM attempts a JOIN operations o ON o.id = a.operation_id
	WHERE a.provider_ref = @ref AND a.provider_ref <> '' AND o.provider = @provider AND a.operation_id IS DISTINCT FROM @except::uuid
	UNION ALL
	SELECT o.id FROM operations o
	WHERE o.tenant_id = (SELECT e.tenant_id FROM operations e WHERE e.id = @except::uuid)
		AND o.provider = @provider AND o.provider_ref = @ref AND o.provider_ref <> '' AND o.id IS DISTINCT FROM @except::uuid
) owners LIMIT 1`

// RecordOwner implements ops.EventStore.
func (db *DB) RecordOwner(ctx context.Context, provider, ref, except string) (string, error) {
	var owner string
	err := db.Pool.QueryRow(ctx, recordOwnerSQL, pgx.NamedArgs{"provider": provider, "ref": ref, "except": operationIDArg(except)}).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return owner, interpret(err, "find the operation of a provider's record")
}
