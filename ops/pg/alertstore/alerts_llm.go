package alertstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// apiLabel is the label of the API operation o called ("chat_completions", "responses"), as
// the operation keeps it on its row from its opening, so that the events of a call whose
// request the purge deleted are still counted under its API. It is empty for an operation
// that called no LLM API (a refund) and for a client request that names no operation.
const apiLabel = `coalesce(o.api, '')`

// possibleDuplicatesSQL counts the attempts flagged as possible duplicates that finished in
// [@from, @to); the flag is written when they finish. They are found on
// attempts_possible_duplicate_started_idx (migration 00038): an attempt that finished before
// @to started before it.
const possibleDuplicatesSQL = `
SELECT o.tenant_id, o.kind, o.provider, ` + apiLabel + `, count(*)::float8
FROM attempts a JOIN operations o ON o.id = a.operation_id
WHERE a.possible_duplicate AND a.started_at < @to AND a.finished_at >= @from AND a.finished_at < @to
GROUP BY 1, 2, 3, 4`

// apiCount is a count of one tenant, kind, provider and API.
type apiCount struct {
	tenant        int64
	kind          ops.Kind
	provider, api string
	n             float64
}

// possibleDuplicates counts, by tenant, kind, provider and API, the attempts flagged as
// possible duplicates that finished in [from, to).
func (s *Store) possibleDuplicates(ctx context.Context, from, to time.Time) ([]apiCount, error) {
	return s.countByAPI(ctx, possibleDuplicatesSQL, pgx.NamedArgs{"from": from, "to": to}, "count possible duplicates")
}

func (s *Store) countByAPI(ctx context.Context, sql string, args pgx.NamedArgs, what string) ([]apiCount, error) {
	rows, err := s.db.Pool.Query(ctx, sql, args)
	if err != nil {
		return nil, pg.Interpret(err, what)
	}
	var out []apiCount
	var d apiCount
	var kind string
	_, err = pgx.ForEachRow(rows, []any{&d.tenant, &kind, &d.provider, &d.api, &d.n}, func() error {
		d.kind = ops.Kind(kind)
		out = append(out, d)
		return nil
	})
	return out, pg.Interpret(err, what)
}
