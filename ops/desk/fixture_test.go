package desk_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fixture is the desk's world: a migrated database of its own, a ledger on a manual clock
// with every kind registered, and one tenant.
type fixture struct {
	db     *pg.DB
	clock  *ops.ManualClock
	ledger *ops.Ledger
	tenant int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.New(t)
	f := &fixture{db: db, clock: ops.NewManualClock(t0)}
	f.ledger = ops.NewLedger(db, f.clock)
	f.ledger.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&f.tenant); err != nil {
		t.Fatal(err)
	}
	return f
}

// refund is the intent of a refund of cents on order.
func (f *fixture) refund(order string, cents int64) ops.Intent {
	return ops.Intent{TenantID: f.tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: fmt.Sprintf("%s:%d:usd", order, cents), Fingerprint: fmt.Sprintf("fp-%s-%d", order, cents),
		OrderRef: order, AmountCents: cents, Currency: "usd", PaymentRef: "pi_1", Retention: 24 * time.Hour}
}

// seed builds operations in given states on the fixture's ledger.
func (f *fixture) seed() *opstest.Seeder { return opstest.New(f.ledger, f.db) }

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// toUnknown opens a refund of 38.00 on order and leaves it unknown after a saved 500.
func (f *fixture) toUnknown(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund(order, 3800), "req-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown {
		t.Fatalf("status %s, want unknown", op.Status)
	}
	return op
}
