package refund_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
)

// An agent told "unconfirmed: calling again with the same arguments is safe" calls again
// after a lookup closed the refund as made. The payment has room for a second refund of the
// same amount; the answer must still be the refund already made, and Stripe refunds once.
// Found by the chaos simulation (a client that retries after the reaper or a person settled
// its refund).
func TestCallingAgainAfterUnconfirmedNeverRefundsTwice(t *testing.T) {
	t.Parallel()
	// A second for the call, so that a busy machine still sends its request before it ends.
	w := newWorld(t, time.Second, time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 1500 * time.Millisecond})
	ctx := context.Background()
	first := w.Req("toolu_01")
	first.AmountCents = 1900
	a, err := w.Refunds.Refund(ctx, first)
	if err != nil || a.Status != refund.Unconfirmed {
		t.Fatalf("first call %+v (%v), want unconfirmed", a, err)
	}
	waitForFakeRefunds(t, w, 1)
	w.Clock.Advance(2 * time.Hour) // past the call's lease
	res, applied, err := w.Refunds.Lookup(ctx, w.DB, a.OperationID, "oncall@example.com")
	if err != nil || !res.Found() || applied.Op == nil || applied.Op.Status != ops.StatusSucceeded {
		t.Fatalf("lookup %+v %+v (%v)", res, applied, err)
	}
	w.Clock.Advance(3 * time.Hour)
	again := w.Req("toolu_02")
	again.AmountCents = 1900
	b, err := w.Refunds.Refund(ctx, again)
	if err != nil || b.Status != refund.Refunded || b.OperationID != a.OperationID {
		t.Fatalf("calling again answered %+v (%v), want the refund of %s", b, err, a.OperationID)
	}
	if n := len(w.Fake.Refunds()); n != 1 {
		t.Fatalf("%d refunds at Stripe, want 1", n)
	}
	// After the replay window the same order and amount is a new intent (a second refund on
	// purpose), and the payment's remainder is checked as usual.
	w.Clock.Advance(refund.ReplayWindow)
	later := w.Req("toolu_03")
	later.AmountCents = 1900
	if c, err := w.Refunds.Refund(ctx, later); err != nil || c.Status != refund.Refunded || c.OperationID == a.OperationID {
		t.Fatalf("after the window: %+v (%v), want a new refund", c, err)
	}
}
