package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// UnknownLLM implements recon.Store: the LLM operations of a provider left unknown or
// expired since before, newest first, through operations_open_age_idx (the unknown backlog
// is small).
func (db *DB) UnknownLLM(ctx context.Context, provider string, before time.Time, limit int) ([]*ops.Operation, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+opCols+` FROM operations o
WHERE o.status IN ('unknown', 'expired') AND o.kind IN ('llm_call', 'llm_job') AND o.provider = @provider
	AND o.updated_at <= @before
ORDER BY o.updated_at DESC, o.id LIMIT @limit`, pgx.NamedArgs{"provider": provider, "before": before, "limit": limit})
	if err != nil {
		return nil, interpret(err, "find unknown LLM operations")
	}
	return collectOps(rows)
}
