package purgestore_test

import (
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
	plan := pgtest.PlanWithoutSeqScan(t, pgtest.New(t), purgestore.PurgeOperationsSQL,
		pgx.NamedArgs{"now": time.Now(), "keep": 24 * time.Hour, "batch": 100})
	if !strings.Contains(plan, "Index Scan using operations_body_purge_idx") {
		t.Errorf("the purge does not read the finished calls on their index:\n%s", plan)
	}
}
