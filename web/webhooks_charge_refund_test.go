package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// TestChargeRefundUpdatedFailedAfterSuccessFailsTheOperation: Stripe reports a refund's
// later failure as charge.refund.updated to an endpoint subscribed to it (the event's
// object is the refund, as in refund.updated). A pending refund Settle recorded as
// succeeded fails at the bank and only that event tells. The operation must become failed
// after success with its exception, never stay shown as money moved (ops rule 9, ops rule
// 12); a receiver that ignores the event type answers 200 "ignored", records the event as
// seen, and Stripe never sends the news again.
func TestChargeRefundUpdatedFailedAfterSuccessFailsTheOperation(t *testing.T) {
	t.Parallel()
	e := newRefundEnvWith(t, fake.StripeOptions{PendingRefunds: true})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "refund_pending" {
		t.Fatalf("%d %v, want refund_pending", code, out)
	}
	opID, re := out["operation_id"].(string), out["refund_id"].(string)
	if op, _ := e.db.Get(context.Background(), opID); op.Status != ops.StatusSucceeded {
		t.Fatalf("the pending refund left the operation %s, want succeeded", op.Status)
	}

	payload, sig := refundEvent(t, "evt_charge_refund_failed", "charge.refund.updated", opID, re, "failed", time.Now())
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "failed_after_success" {
		t.Fatalf("charge.refund.updated failed: %d %v, want 200 failed_after_success", code, out)
	}
	if op, _ := e.db.Get(context.Background(), opID); op.Status != ops.StatusFailed {
		t.Fatalf("after Stripe said the refund failed the operation is %s", op.Status)
	}
	var exceptions int
	if err := e.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM recon_exceptions WHERE operation_id = $1`, opID).Scan(&exceptions); err != nil {
		t.Fatal(err)
	}
	if exceptions == 0 {
		t.Error("the refund that failed after success raised no reconciliation exception")
	}
}
