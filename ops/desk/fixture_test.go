package desk_test

import (
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest/pgworld"
)

// t0 is the fixture's clock at its start.
var t0 = pgworld.T0

// fixture is the desk's world: the stores' shared test world (a migrated database of its
// own, a ledger on a manual clock with every kind registered, and one tenant), under the
// names the desk's tests use.
type fixture struct {
	w      *pgworld.World
	db     *pg.DB
	clock  *ops.ManualClock
	ledger *ops.Ledger
	tenant int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	w := pgworld.New(t)
	return &fixture{w: w, db: w.DB, clock: w.Clock, ledger: w.Ledger, tenant: w.Tenant}
}

// refund is the intent of a refund of cents on order.
func (f *fixture) refund(order string, cents int64) ops.Intent { return f.w.Refund(order, cents) }

// seed builds operations in given states on the fixture's ledger.
func (f *fixture) seed() *opstest.Seeder { return f.w.Seed() }

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return f.w.Count(t, query, args...)
}

// toUnknown opens a refund of 38.00 on order and leaves it unknown after a saved 500.
func (f *fixture) toUnknown(t *testing.T, order string) *ops.Operation {
	t.Helper()
	return f.w.ToUnknown(t, order)
}
