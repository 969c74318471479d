// Package refundtest wires the refund tool for tests as production wires it: Postgres,
// stripe-go and the fake Stripe over loopback. The refund flow's tests (ops/refund) and the
// Stripe adapter's (ops/stripe) both run on it.
package refundtest

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// Story is the payment intent of the refund every test tells: order 4417, 38.00 USD, paid
// to the tenant "shop".
const Story = "pi_4417"

// World is one test's refund tool, its database, clock and fake Stripe.
type World struct {
	DB      *pg.DB
	Clock   *ops.ManualClock
	Fake    *fake.Stripe
	Base    string // the fake Stripe's URL
	Adapter *stripe.Adapter
	Refunds *refund.Tool
	Tenant  int64 // the id of the tenant "shop"
}

// New starts a world whose Stripe calls give up after attemptTimeout and whose refunds
// after deadline; the ledger backs off for tens of milliseconds so that retries stay quick.
func New(t *testing.T, attemptTimeout, deadline time.Duration) *World {
	t.Helper()
	db := pgtest.New(t)
	w := &World{DB: db, Clock: ops.NewManualClock(time.Now().UTC())}
	w.Fake = fake.NewStripe(fake.StripeOptions{Clock: w.Clock.Now, Seed: 1})
	base, err := w.Fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Fake.Close() })
	w.Base = base
	w.Fake.AddPaymentIntent(Story, 3800, "usd", fake.OwnedBy("shop"))
	w.Adapter = stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: base, AttemptTimeout: attemptTimeout})
	ledger := ops.NewLedger(db, w.Clock)
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	w.Refunds = &refund.Tool{Ledger: ledger, Store: db, Provider: w.Adapter, Deadline: deadline}
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&w.Tenant); err != nil {
		t.Fatal(err)
	}
	return w
}

// Req is the story's refund request under the client's reference ref.
func (w *World) Req(ref string) refund.Request {
	return refund.Request{TenantID: w.Tenant, Tenant: "shop", OrderID: "4417", AmountCents: 3800, Currency: "usd",
		PaymentIntent: Story, Reason: "requested_by_customer", RequestRef: ref}
}

// Count runs q, a query of one integer, and fails the test if it cannot.
func (w *World) Count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := w.DB.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
