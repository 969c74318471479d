package refund_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
)

// TestAnotherReasonAfterARefusalIsNotToldItIsBeingRefunded: Stripe refused the refund
// (nothing ran); the client asks again with another reason and is answered with that
// refused operation. The answer must not say the order "is already being refunded": it was
// not, and nothing is on its way (ops rule 12).
func TestAnotherReasonAfterARefusalIsNotToldItIsBeingRefunded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultRefuse})
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil || first.Status != refund.Failed {
		t.Fatalf("first call: %+v %v, want failed", first, err)
	}
	again := w.Req("toolu_02")
	again.Reason = "duplicate"
	out, err := w.Refunds.Refund(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != refund.Failed || out.OperationID != first.OperationID || strings.Contains(out.Note, "being refunded") {
		t.Fatalf("try again with another reason after a refusal: %+v", out)
	}
	if n := len(w.Fake.Refunds()); n != 0 {
		t.Fatalf("%d refunds at Stripe, want none", n)
	}
}
