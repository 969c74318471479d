package web_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/stripe"
)

// refundEvent returns an event of type typ about refund re of the story's payment in
// status, carrying opID, created at created and signed now.
func refundEvent(t *testing.T, eventID, typ, opID, re, status string, created time.Time) ([]byte, string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"id": eventID, "object": "event", "type": typ,
		"api_version": "2020-08-27", "created": created.Unix(),
		"data": map[string]any{"object": map[string]any{"id": re, "object": "refund", "amount": 3800, "currency": "usd",
			"status": status, "payment_intent": "pi_4417", "metadata": map[string]string{stripe.MetadataKey: opID}}}})
	return payload, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: hookSecret, Timestamp: time.Now()}).Header
}

// TestLateEventDoesNotReviveAFailedRefund: Stripe does not deliver events in order, and
// resends one its receiver refused for days. A pending refund fails; its refund.updated
// arrives first and the operation becomes failed after success. Then the refund.created
// of its pending start arrives, late (its first delivery was refused). The operation stays
// failed, and the charge Settle keeps stays failed: the reconciliation table and the charge
// alerts count a charge by that status, and a failed refund moved no money (ops rule 12).
// The reconciler would not correct it: it lists refunds by when they were created.
func TestLateEventDoesNotReviveAFailedRefund(t *testing.T) {
	t.Parallel()
	e := newRefundEnvWith(t, fake.StripeOptions{PendingRefunds: true})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "refund_pending" {
		t.Fatalf("%d %v, want refund_pending", code, out)
	}
	opID, re := out["operation_id"].(string), out["refund_id"].(string)
	created := time.Now().Add(-time.Minute)

	payload, sig := refundEvent(t, "evt_failed", "refund.updated", opID, re, "failed", time.Now())
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "failed_after_success" {
		t.Fatalf("refund.updated failed: %d %v", code, out)
	}
	payload, sig = refundEvent(t, "evt_created", "refund.created", opID, re, "pending", created)
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != "already_closed" {
		t.Fatalf("the late refund.created: %d %v, want 200 already_closed", code, out)
	}
	if op, _ := e.db.Get(context.Background(), opID); op.Status != ops.StatusFailed {
		t.Fatalf("the late event moved the operation to %s", op.Status)
	}
	var status string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT status FROM provider_charges WHERE charge_ref = $1`, re).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "failed" {
		t.Errorf("after the late refund.created the failed refund is kept as %s", status)
	}
	now := time.Now()
	rows, err := rollupstore.New(e.db).ReconMetrics(context.Background(), recon.MetricsFilter{
		Window: recon.Window{From: now.Truncate(time.Hour).Add(-time.Hour), To: now.Truncate(time.Hour).Add(time.Hour)}, Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var charges int64
	for _, r := range rows {
		charges += r.Charges
	}
	if charges != 0 {
		t.Errorf("the reconciliation table counts %d charges for a refund that failed", charges)
	}
}
