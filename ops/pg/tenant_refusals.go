package pg

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// refusalSharesQuery is RefusalShares' statement: $1 the reason, [$2, $3) the window. It
// reads the window's requests through client_requests_received_idx, whatever their tenant,
// and keeps the tenants and kinds with a request refused for the reason.
const refusalSharesQuery = `
SELECT tenant_id, kind, count(*), count(*) FILTER (WHERE answer = 'rejected' AND reason = $1)
FROM client_requests
WHERE received_at >= $2 AND received_at < $3
GROUP BY tenant_id, kind
HAVING count(*) FILTER (WHERE answer = 'rejected' AND reason = $1) > 0
ORDER BY tenant_id, kind`

// RefusalShares counts, for every tenant and kind with a client request received in
// [from, to) and refused for reason, its requests received then and those refused so: the
// counts the built-in rule of a tenant stopped by what is left of its LLM budget judges, for
// the tenants page. The statement stops after limit (when positive), as TenantDays' does, so
// that a busy window cannot hold the page; the caller then says the shares were not read.
func (db *DB) RefusalShares(ctx context.Context, reason string, from, to time.Time, limit time.Duration) ([]ops.RefusalShare, error) {
	var out []ops.RefusalShare
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if limit > 0 {
			// Local to the transaction, so the pooled connection (or a pooler's) keeps its own.
			ms := strconv.FormatInt(max(limit.Milliseconds(), 1), 10)
			if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`, ms); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, refusalSharesQuery, reason, from, to)
		if err != nil {
			return err
		}
		var s ops.RefusalShare
		_, err = pgx.ForEachRow(rows, []any{&s.TenantID, &s.Kind, &s.Requests, &s.Refused}, func() error {
			out = append(out, s)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, interpret(err, "count the tenants' refused requests")
	}
	return out, nil
}
