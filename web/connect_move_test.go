package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// TestARefundOfAMovedTenantIsSettledByTheAccountItWasSentTo: the tenant bound to acct_A
// refunds, the refund is pending there and the operation succeeded; the tenant is then
// moved to acct_C, and acct_A fails the refund. Its refund.updated event still settles the
// operation: it becomes failed after success with an open exception, since money that did
// not move is never shown as refunded (ops rules 9 and 12). An event of the new account
// naming the operation changes nothing.
func TestARefundOfAMovedTenantIsSettledByTheAccountItWasSentTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newConnectEnv(t, fake.StripeOptions{PendingRefunds: true})
	e.fake.SetWebhookURL(e.url + "/webhooks/stripe")
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "refund_pending" {
		t.Fatalf("%d %v, want refund_pending", code, out)
	}
	opID, re := out["operation_id"].(string), out["refund_id"].(string)
	if _, err := e.db.SetStripeAccount(ctx, "shop", "acct_C", "test", time.Now()); err != nil {
		t.Fatalf("move the tenant to acct_C: %v", err)
	}

	payload, sig := signedFrom(t, connectSecret, "acct_C", "evt_c", opID, "re_from_c")
	if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != ops.OutcomeForeignAccount {
		t.Fatalf("the new account's event: %d %v, want 200 %s", code, out, ops.OutcomeForeignAccount)
	}

	if err := e.fake.SetRefundStatus(re, "failed", "declined"); err != nil {
		t.Fatal(err)
	}
	q := `SELECT count(*) FROM provider_events WHERE event_id <> 'evt_c' AND payload::text LIKE '%refund.updated%'`
	for deadline := time.Now().Add(10 * time.Second); e.count(t, q) == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	op, err := e.db.Get(ctx, opID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusFailed {
		t.Fatalf("after acct_A failed the refund it was sent to, the operation is %s (ops rule 9)", op.Status)
	}
	if n := e.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'failed_after_success' AND operation_id = $1 AND status = 'open'`, opID); n != 1 {
		t.Fatalf("%d open failed_after_success exceptions, want 1 (ops rule 12)", n)
	}
}
