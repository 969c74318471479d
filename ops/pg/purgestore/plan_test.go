package purgestore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// TestThePurgeReadsTheFinishedCallsOnItsIndex: operations_body_purge_idx holds the finished
// calls whose bodies are kept, and no open call (migration 00073: an open call takes no entry
// there, which its open and close each cost before). The purge's statement repeats the
// index's predicate, so it reads the oldest of them on the index, never the whole table.
func TestThePurgeReadsTheFinishedCallsOnItsIndex(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN `+purgestore.PurgeOperationsSQL,
		pgx.NamedArgs{"now": time.Now(), "keep": 24 * time.Hour, "batch": 100})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "Index Scan using operations_body_purge_idx") {
		t.Errorf("the purge does not read the finished calls on their index:\n%s", plan)
	}
}
