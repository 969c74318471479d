package alertstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// apiLabel is the label of the API operation o called ("chat_completions", "responses"), as
// the operation keeps it on its row from its opening, so that the events of a call whose
// request the purge deleted are still counted under its API. It is empty for an operation
// that called no LLM API (a refund) and for a client request that names no operation.
const apiLabel = `coalesce(o.api, '')`

// possibleDuplicatesSQL counts the attempts flagged as possible duplicates that finished in
// each window [@froms[i], @tos[i]), by window (numbered from 1); the flag is written when they
// finish. They are found on attempts_possible_duplicate_started_idx (migration 00038), once
// for all the windows, over [@from, @to) which holds them all: an attempt that finished
// before @to started before it.
const possibleDuplicatesSQL = `
SELECT w.i, o.tenant_id, o.kind, o.provider, ` + apiLabel + `, count(*)::float8
FROM attempts a JOIN operations o ON o.id = a.operation_id
	JOIN unnest(@froms::timestamptz[], @tos::timestamptz[]) WITH ORDINALITY w(f, t, i) ON a.finished_at >= w.f AND a.finished_at < w.t
WHERE a.possible_duplicate AND a.started_at < @to AND a.finished_at >= @from AND a.finished_at < @to
GROUP BY 1, 2, 3, 4, 5`

// apiCount is a count of one tenant, kind, provider and API.
type apiCount struct {
	tenant        int64
	kind          ops.Kind
	provider, api string
	n             float64
}

// possibleDuplicates counts, by tenant, kind, provider and API, the attempts flagged as
// possible duplicates that finished in each of ws, out[i] for ws[i], in one statement.
func (s *Store) possibleDuplicates(ctx context.Context, ws []alerts.Window) ([][]apiCount, error) {
	out := make([][]apiCount, len(ws))
	if len(ws) == 0 {
		return out, nil
	}
	froms, tos := make([]time.Time, len(ws)), make([]time.Time, len(ws))
	from, to := ws[0].From, ws[0].To
	for i, w := range ws {
		froms[i], tos[i] = w.From, w.To
		if w.From.Before(from) {
			from = w.From
		}
		if w.To.After(to) {
			to = w.To
		}
	}
	rows, err := s.db.Pool.Query(ctx, possibleDuplicatesSQL, pgx.NamedArgs{"froms": froms, "tos": tos, "from": from, "to": to})
	if err != nil {
		return nil, pg.Interpret(err, "count possible duplicates")
	}
	var i int64
	var d apiCount
	var kind string
	_, err = pgx.ForEachRow(rows, []any{&i, &d.tenant, &kind, &d.provider, &d.api, &d.n}, func() error {
		if i < 1 || i > int64(len(ws)) {
			return fmt.Errorf("possible duplicates of window %d, of %d", i, len(ws))
		}
		d.kind = ops.Kind(kind)
		out[i-1] = append(out[i-1], d)
		return nil
	})
	return out, pg.Interpret(err, "count possible duplicates")
}
