package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/refund"
)

// TestRefundStatusByOrderAloneNeverSpeaksForAnotherRefund: an order with two refunds, 20.00
// refunded and 10.00 refused by Stripe. refund_status asked with the order alone must not
// answer with the newest of them, "failed, no money was moved", while 20.00 of that order
// was refunded (ops rule 12): it asks for the amount and currency instead, and with them
// answers each refund truthfully.
func TestRefundStatusByOrderAloneNeverSpeaksForAnotherRefund(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{2}, Kind: fake.FaultRefuse})
	cs := e.session(t)
	args := storyArgs()
	args["amount_cents"] = 2000
	if _, a, text := call(t, cs, "issue_refund", args, nil); a.Status != refund.Refunded {
		t.Fatalf("first refund: %+v %q", a, text)
	}
	args["amount_cents"] = 1000
	if _, a, text := call(t, cs, "issue_refund", args, nil); a.Status != refund.Failed {
		t.Fatalf("second refund: %+v %q", a, text)
	}
	res, ans, text := call(t, cs, "refund_status", map[string]any{"order_id": "4417"}, nil)
	if !res.IsError || ans.Status == refund.Failed || ans.CustomerMessage == mcptool.CustomerFailed || !strings.Contains(text, "amount_cents") {
		t.Fatalf("status of an order with two refunds, by the order alone: %+v %q", ans, text)
	}
	// Another tenant asking about the same order id knows of no refund of it.
	other, _ := e.db.EnsureTenant(context.Background(), "other")
	tok, _ := e.db.CreateToken(context.Background(), other.ID, "t")
	ocs, err := e.connect(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer ocs.Close()
	for _, args := range []map[string]any{{"order_id": "4417"}, {"order_id": "4417", "amount_cents": 2000, "currency": "usd"}} {
		if res, a, text := call(t, ocs, "refund_status", args, nil); res.IsError || a.Status != refund.Checking || a.OperationID != "" {
			t.Fatalf("another tenant asking %v is answered %+v %q", args, a, text)
		}
	}
	for cents, want := range map[int]string{2000: refund.Refunded, 1000: refund.Failed} {
		_, a, text := call(t, cs, "refund_status", map[string]any{"order_id": "4417", "amount_cents": cents, "currency": "usd"}, nil)
		if a.Status != want {
			t.Fatalf("status of %d: %+v %q, want %s", cents, a, text, want)
		}
	}
}
