// Package pgworld is the test world the stores under ops/pg and the desk share: a ledger
// with the refund, LLM and job kinds on a private database holding one tenant, a manual
// clock, and helpers that seed operations through the ledger's own protocol. It sits apart
// from pgtest because it imports the kinds' packages, whose own tests use pgtest.
package pgworld

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

// T0 is the world's clock at its start.
var T0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// World is a ledger on a private database with one tenant: the world of the stores' tests
// and of the desk's.
type World struct {
	DB     *pg.DB
	Clock  *ops.ManualClock
	Ledger *ops.Ledger
	Tenant int64
}

// New starts a world on a database of its own, with the tenant "acme".
func New(t *testing.T) *World {
	t.Helper()
	db := pgtest.New(t)
	w := &World{DB: db, Clock: ops.NewManualClock(T0)}
	w.Ledger = ops.NewLedger(db, w.Clock)
	w.Ledger.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&w.Tenant); err != nil {
		t.Fatal(err)
	}
	return w
}

// Refund is the tenant's intent to refund cents of order.
func (w *World) Refund(order string, cents int64) ops.Intent {
	return ops.Intent{TenantID: w.Tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: fmt.Sprintf("%s:%d:usd", order, cents), Fingerprint: fmt.Sprintf("fp-%s-%d", order, cents),
		OrderRef: order, AmountCents: cents, Currency: "usd", PaymentRef: "pi_1", Retention: 24 * time.Hour}
}

// Seed builds operations in given states on the world's ledger.
func (w *World) Seed() *opstest.Seeder { return opstest.New(w.Ledger, w.DB) }

// Count runs a query that returns one number.
func (w *World) Count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := w.DB.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// ToUnknown opens a refund of order and leaves it unknown after a saved 500.
func (w *World) ToUnknown(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := w.Seed().Open(ctx, w.Refund(order, 3800), "req-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := w.Seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown {
		t.Fatalf("status %s, want unknown", op.Status)
	}
	return op
}
