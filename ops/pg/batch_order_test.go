package pg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestTwoBatchesLockTheirRowsInOneOrder: two group-commit batches at once hold the same two
// statements in opposite orders, as concurrent repeats of two intents queued on two
// replicas' or two leaders' batches do. Each statement takes its row and holds it to the
// batch's commit; were they sent in their arrival order, each batch would wait for the
// other's second row, Postgres would roll one back after a second, and every statement of
// it would be sent again one at a time. Sent in the order of the rows they lock, the second
// batch waits for the first and neither is rolled back.
// ops rule 6: every change is one compare-and-set, whatever batch it rides in.
func TestTwoBatchesLockTheirRowsInOneOrder(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE lock_order (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	// Each insert waits a moment first, so that both batches hold their first row before
	// either asks for its second.
	insert := func(k string) pg.BatchJob {
		return pg.BatchJob{Key: k, Args: []any{k}, SQL: `WITH pause AS (SELECT pg_sleep(0.3))
INSERT INTO lock_order SELECT $1::text FROM pause ON CONFLICT (k) DO UPDATE SET k = excluded.k RETURNING k`}
	}
	var wg sync.WaitGroup
	for _, batch := range [][]pg.BatchJob{{insert("a"), insert("b")}, {insert("b"), insert("a")}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pg.RunBatch(db, batch)
		}()
	}
	wg.Wait()
	if n := pg.RunBatch(db, nil); n != 0 {
		t.Errorf("%d batch(es) rolled back and sent again one statement at a time, want none", n)
	}
}
