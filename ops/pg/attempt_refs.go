package pg

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// recordRefSQL records an attempt's ref; recordRefLightSQL does so in a transaction whose
// commit does not wait for the disk, for a ref no lookup reads.
const (
	recordRefSQL      = `UPDATE attempts SET provider_ref = @ref WHERE operation_id = @op AND n = @n AND provider_ref = ''`
	recordRefLightSQL = recordRefSQL + ` AND set_config('synchronous_commit', 'off', true) = 'off'`
)

// RecordAttemptRef implements llm.AttemptRefs: the provider's id of what attempt n of the
// operation generated, kept once set. Unless durable, its commit does not wait for the WAL
// to reach the disk (synchronous_commit off for this statement's transaction alone).
func (db *DB) RecordAttemptRef(ctx context.Context, opID string, n int, ref string, durable bool) error {
	sql := recordRefSQL
	if !durable {
		sql = recordRefLightSQL
	}
	_, err := db.Pool.Exec(ctx, sql, pgx.NamedArgs{"op": opID, "n": n, "ref": storableText(ref)})
	return interpret(err, "record the provider's id of an attempt")
}

// AttemptRefSQL is the provider's id of what attempt a of operation o generated, empty when
// none is known: the id the attempt recorded as the provider named it, else, for the attempt
// that succeeded, the operation's record, which the same statement that finished the attempt
// wrote and nothing changes afterwards (succeeded is final; a failure after it keeps the
// record). The finish leaves it off the attempt's row so that the row's indexes take no
// entry (see transitionFin).
const AttemptRefSQL = `CASE WHEN a.provider_ref = '' AND a.outcome = 'ok' THEN o.provider_ref ELSE a.provider_ref END`

// AttemptRefs returns the provider's ids recorded for the attempts of an operation, by
// attempt number; attempts without one are left out.
func (db *DB) AttemptRefs(ctx context.Context, opID string) (map[int]string, error) {
	rows, err := db.Pool.Query(ctx, `SELECT a.n, r.ref FROM attempts a JOIN operations o ON o.id = a.operation_id,
	LATERAL (SELECT `+AttemptRefSQL+` AS ref) r
WHERE a.operation_id = @op AND r.ref <> '' ORDER BY a.n`, pgx.NamedArgs{"op": opID})
	if err != nil {
		return nil, interpret(err, "read the provider's ids of attempts")
	}
	out := map[int]string{}
	var n int
	var ref string
	_, err = pgx.ForEachRow(rows, []any{&n, &ref}, func() error {
		out[n] = ref
		return nil
	})
	return out, interpret(err, "read the provider's ids of attempts")
}
