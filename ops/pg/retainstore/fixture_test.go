package retainstore_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/pgtest/pgworld"
	"github.com/settle-dev/settle/ops/pg/retainstore"
)

var t0 = pgworld.T0

// fixture is the stores' test world with the retention's store on its database.
type fixture struct {
	*pgworld.World
	retain *retainstore.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	w := pgworld.New(t)
	return &fixture{World: w, retain: retainstore.New(w.DB)}
}

// seedHistory is pgtest.SeedHistory with its attempt's finish audited on the attempt, and,
// for an llm_job operation, the pipeline job whose generation it is: the retention removes
// both with their operation.
func seedHistory(t *testing.T, db *pg.DB, tenant int64, status ops.Status, kind ops.Kind, created time.Time, closed *time.Time) string {
	t.Helper()
	id := pgtest.SeedHistory(t, db, tenant, status, kind, created, closed)
	pgtest.SeedFinish(t, db, id)
	if kind == ops.KindLLMJob {
		pgtest.SeedJob(t, db, tenant, id, created)
	}
	return id
}
