package recon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/stripe"
)

// TestAHandMadeRefundOfAnotherAmountIsAnOrphanNotTheOperationsRecord: an unknown refund of
// 38.00 USD whose own refund Stripe made, and a refund of 12.00 USD someone made by hand
// with its settle_operation_id copied, listed first. Reconciliation closes the operation
// with its own refund only (ops rule 9: its evidence is a record of its amount) and raises
// the hand-made one as an orphan charge that names the operation, so a person finds out who
// refunded what (ops rule 12).
func TestAHandMadeRefundOfAnotherAmountIsAnOrphanNotTheOperationsRecord(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.unknown(t, 3800, "amt-700")[0]
	own := w.fake.Refunds()[0]
	byHand := w.outsideRefund(t, 1200, map[string]string{stripe.MetadataKey: op.ID})
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Closed != 1 || rep.Orphans != 1 || rep.DoubleCharges != 0 {
		t.Fatalf("reconciliation: %s; want the operation closed by its own refund and one orphan", rep.Summary())
	}
	got, err := w.ledger.Get(ctx, op.ID)
	if err != nil || got.Status != ops.StatusSucceeded || got.ProviderRef != own.ID {
		t.Fatalf("operation %+v (%v), want succeeded with its own refund %s, not %s", got, err, own.ID, byHand.ID)
	}
	var summary string
	if err := w.db.Pool.QueryRow(ctx, `SELECT summary FROM recon_exceptions WHERE kind = 'orphan_charge' AND ref = $1`, byHand.ID).Scan(&summary); err != nil {
		t.Fatalf("no orphan exception for the hand-made refund %s: %v", byHand.ID, err)
	}
	if !strings.Contains(summary, op.ID) || !strings.Contains(summary, "another amount") {
		t.Fatalf("orphan summary %q, want it to name operation %s and say its amount differs", summary, op.ID)
	}
}
