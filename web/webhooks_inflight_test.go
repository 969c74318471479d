package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// TestRefundFailedWhileInFlightIsDeliveredAgain: Stripe accepts a pending refund but its
// answer never reaches Settle; while the call's run still holds the operation, the bank
// refuses the refund and Stripe's refund.updated (failed) arrives. The resend under the
// same key is answered by Stripe's idempotency with the original pending refund, so the
// operation closes succeeded. The failure event is the only news that the money never
// moved: it must not be used up by its delivery during the run. Its first delivery is
// refused (non-2xx, not recorded as seen), so Stripe delivers it again, and that delivery
// makes the operation failed after success with an open exception (ops rules 9 and 12).
func TestRefundFailedWhileInFlightIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	e := newRefundEnvWith(t, fake.StripeOptions{PendingRefunds: true})
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 2500 * time.Millisecond})
	done := make(chan map[string]any, 1)
	go func() {
		_, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
		done <- out
	}()
	re := waitForRefund(t, e.fake)
	if err := e.fake.SetRefundStatus(re, "failed", "declined"); err != nil {
		t.Fatal(err)
	}
	evs := e.fake.Events()
	failed := evs[len(evs)-1]
	e.fake.SetWebhookURL(e.url + "/webhooks/stripe")
	opID := e.onlyOperation(t)
	if op, _ := e.db.Get(context.Background(), opID); !op.Leased(time.Now()) {
		t.Fatalf("the operation is %s and not leased when the failure arrives: the test did not race", op.Status)
	}
	if err := e.fake.ResendEvent(failed.ID); err == nil {
		t.Errorf("the failure event delivered while the refund was in flight was answered 2xx: Stripe will not deliver it again")
	}
	if n := e.count(t, `SELECT count(*) FROM provider_events WHERE event_id = $1`, failed.ID); n != 0 {
		t.Errorf("the failure event is recorded as seen while it changed nothing")
	}
	<-done
	op := e.waitClosed(t, opID)
	if op.Status != ops.StatusSucceeded {
		t.Fatalf("the resend closed the operation %s, want succeeded from the replayed pending refund", op.Status)
	}
	if err := e.fake.ResendEvent(failed.ID); err != nil {
		t.Fatalf("Stripe's redelivery of the failure: %v", err)
	}
	if op, _ = e.db.Get(context.Background(), opID); op.Status != ops.StatusFailed {
		t.Fatalf("after Stripe delivered the failure again the operation is %s: the customer is told money is on its way", op.Status)
	}
	if n := e.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'failed_after_success' AND operation_id = $1 AND status = 'open'`, opID); n != 1 {
		t.Fatalf("%d open failed-after-success exceptions, want 1", n)
	}
}

// waitForRefund waits until the fake holds a refund and returns its id.
func waitForRefund(t *testing.T, fk *fake.Stripe) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rs := fk.Refunds(); len(rs) > 0 {
			return rs[0].ID
		}
	}
	t.Fatal("the fake never made the refund")
	return ""
}

// onlyOperation returns the id of the one operation the test opened.
func (e *refundEnv) onlyOperation(t *testing.T) string {
	t.Helper()
	var id string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT id FROM operations`).Scan(&id); err != nil {
		t.Fatalf("the operation: %v", err)
	}
	return id
}

// waitClosed waits for the operation to close, retrying the client's request while it is
// left open, as a client does.
func (e *refundEnv) waitClosed(t *testing.T, opID string) *ops.Operation {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		op, err := e.db.Get(context.Background(), opID)
		if err == nil && op.Status.Final() {
			return op
		}
		if err == nil && !op.Leased(time.Now()) {
			e.post(t, "/api/v1/refunds", "application/json", storyBody)
		}
	}
	t.Fatalf("operation %s never closed", opID)
	return nil
}
