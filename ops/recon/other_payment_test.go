package recon_test

import (
	"context"
	"strings"
	"testing"

	stripelib "github.com/stripe/stripe-go/v76"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/stripe"
)

// TestAHandMadeRefundOfAnotherPaymentIsAnOrphanNotTheOperationsRecord: a refund of 38.00
// USD of payment pi_recon answered Stripe's 500, so its operation is unknown and Stripe made
// no refund. Someone then refunds 38.00 USD of another customer's payment by hand, with the
// operation's settle_operation_id copied onto it. That refund is evidence that the other
// customer got money back, not the operation's: reconciliation must not close the operation
// as succeeded with it, which would tell its customer of money they never got (ops rule 9,
// ops rule 12). It is raised as an orphan charge naming the operation, and the operation
// stays unknown for a lookup, which lists its own payment's refunds only.
func TestAHandMadeRefundOfAnotherPaymentIsAnOrphanNotTheOperationsRecord(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	w.fake.AddPaymentIntent("pi_other", 100_000, "usd", fake.OwnedBy("shop"))
	op := w.unknownWithoutRefund(t, "pay-800", 3800)
	byHand, err := w.outside.Refunds.New(&stripelib.RefundParams{PaymentIntent: stripelib.String("pi_other"),
		Amount: stripelib.Int64(3800), Metadata: map[string]string{stripe.MetadataKey: op.ID}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.ledger.Get(ctx, op.ID)
	if err != nil || got.Status != ops.StatusUnknown {
		t.Fatalf("operation %+v (%v), want it left unknown: %s refunds pi_other, not its %s", got, err, byHand.ID, op.PaymentRef)
	}
	if rep.Closed != 0 || rep.Orphans != 1 {
		t.Fatalf("reconciliation: %s; want nothing closed and one orphan", rep.Summary())
	}
	var summary string
	if err := w.db.Pool.QueryRow(ctx, `SELECT summary FROM recon_exceptions WHERE kind = 'orphan_charge' AND ref = $1`, byHand.ID).Scan(&summary); err != nil {
		t.Fatalf("no orphan exception for the hand-made refund %s: %v", byHand.ID, err)
	}
	if !strings.Contains(summary, op.ID) || !strings.Contains(summary, "another payment") {
		t.Fatalf("orphan summary %q, want it to name operation %s and say it refunds another payment", summary, op.ID)
	}
}

// unknownWithoutRefund opens a refund operation whose one attempt Stripe answered 500
// without refunding anything, and leaves it unknown (ops rule 5).
func (w *world) unknownWithoutRefund(t *testing.T, order string, cents int64) *ops.Operation {
	t.Helper()
	w.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError})
	defer w.fake.ClearFaults()
	o := w.open(t, order, cents)
	op, err := w.seed().Finish(context.Background(), o.Op, o.Attempt, "w1", w.send(t, o))
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown || len(w.fake.Refunds()) != 0 {
		t.Fatalf("after Stripe's 500 the operation is %s with %d refunds at Stripe, want unknown and none", op.Status, len(w.fake.Refunds()))
	}
	return op
}
