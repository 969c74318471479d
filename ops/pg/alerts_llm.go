package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// apiRoute is the gateway route of operation o, which its stored request names: a job's
// generation is a chat completion, and an operation that called no LLM API (a refund), or
// whose request the purge deleted, has none.
const apiRoute = `coalesce(o.request->>'route', CASE WHEN o.kind = 'llm_job' THEN '/v1/chat/completions' ELSE '' END)`

// possibleDuplicatesSQL counts the attempts flagged as possible duplicates that finished in
// [@from, @to); the flag is written when they finish. They are found on
// attempts_possible_duplicate_started_idx (migration 00038): an attempt that finished before
// @to started before it.
const possibleDuplicatesSQL = `
SELECT o.tenant_id, o.kind, o.provider, count(*)::float8
FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.possible_duplicate AND a.started_at < @to AND a.finished_at >= @from AND a.finished_at < @to
GROUP BY 1, 2, 3`

// dupCount is the possible duplicates of one tenant, kind and provider.
type dupCount struct {
	tenant   int64
	kind     ops.Kind
	provider string
	n        float64
}

// possibleDuplicates counts, by tenant, kind and provider, the attempts flagged as possible
// duplicates that finished in [from, to).
func (db *DB) possibleDuplicates(ctx context.Context, from, to time.Time) ([]dupCount, error) {
	rows, err := db.Pool.Query(ctx, possibleDuplicatesSQL, pgx.NamedArgs{"from": from, "to": to})
	if err != nil {
		return nil, interpret(err, "count possible duplicates")
	}
	var out []dupCount
	var d dupCount
	var kind string
	_, err = pgx.ForEachRow(rows, []any{&d.tenant, &kind, &d.provider, &d.n}, func() error {
		d.kind = ops.Kind(kind)
		out = append(out, d)
		return nil
	})
	return out, interpret(err, "count possible duplicates")
}
