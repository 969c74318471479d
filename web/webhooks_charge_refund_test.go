package web_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/stripe"
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

// TestWebhookRefundOfAnotherPaymentDoesNotCloseTheOperation: Stripe saved a 500 under a
// refund's key, so its operation is unknown and nothing was refunded. A signed event then
// announces a refund that succeeded, of the same 38.00 USD and naming the operation in its
// metadata, but of another payment (someone refunded another customer's order by hand and
// copied the metadata). It is no evidence that the operation's customer got money back: the
// operation stays unknown (ops rule 9, ops rule 12), and the event is answered 200
// other_payment, so Stripe stops resending it.
func TestWebhookRefundOfAnotherPaymentDoesNotCloseTheOperation(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultServerError})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	opID, _ := out["operation_id"].(string)
	op, err := e.db.Get(context.Background(), opID)
	if code != 200 || err != nil || op.Status != ops.StatusUnknown {
		t.Fatalf("%d %v (%v), want the refund's operation unknown after Stripe's 500", code, out, err)
	}
	payload, _ := json.Marshal(map[string]any{"id": "evt_other_payment", "object": "event", "type": "refund.updated",
		"api_version": "2020-08-27", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{"id": "re_other_payment", "object": "refund", "amount": 3800, "currency": "usd",
			"status": "succeeded", "payment_intent": "pi_other", "metadata": map[string]string{stripe.MetadataKey: opID}}}})
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: hookSecret, Timestamp: time.Now()}).Header
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != ops.OutcomeOtherPayment {
		t.Errorf("a refund of pi_other naming the operation: %d %v, want 200 %s", code, out, ops.OutcomeOtherPayment)
	}
	if got, _ := e.db.Get(context.Background(), opID); got.Status != ops.StatusUnknown || got.Version != op.Version {
		t.Fatalf("a refund of another payment moved the operation of pi_4417 to %s (closed by %q, record %s)", got.Status, got.ClosedBy, got.ProviderRef)
	}
}
