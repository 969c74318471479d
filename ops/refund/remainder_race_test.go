package refund_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// TestConcurrentIntentsOverThePaymentRefundItOnce: eight orders' refunds of 10.00 on one
// payment of 38.00, sent at the same moment, all pass the remainder check before any of
// them opens (the check reads Stripe, then the open operations, and opening is guarded by
// the intent alone). Stripe's own refusal keeps the payment from being refunded past what
// was paid (ops rule 3); the calls it refused answer failed with its reason, the ones
// refused earlier amount_over_remainder, and none is told it refunded or may have
// (ops rule 12).
func TestConcurrentIntentsOverThePaymentRefundItOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2*time.Second, 5*time.Second)
	// Reads uncapped, so that every call reads the payment at the same moment.
	tool := *w.Refunds
	tool.Provider = stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: w.Base, AttemptTimeout: 2 * time.Second,
		ReadsPerSecond: 1000, TenantReadsPerSecond: 1000})
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 100 * time.Millisecond})
	const n = 8 // eight orders' refunds of 10.00 on one payment of 38.00
	answers := make([]refund.Answer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := w.Req(fmt.Sprintf("order-%d", i))
			req.OrderID, req.AmountCents = fmt.Sprintf("44%02d", i), 1000
			<-start
			answers[i], errs[i] = tool.Refund(context.Background(), req)
		}()
	}
	close(start)
	wg.Wait()
	var refunded int64
	for _, r := range w.Fake.Refunds() {
		refunded += r.Amount
	}
	if refunded > 3800 {
		t.Fatalf("Stripe refunded %d of a 3800 payment", refunded)
	}
	won := 0
	for i, a := range answers {
		switch {
		case errs[i] == nil && a.Status == refund.Refunded:
			won++
		case errs[i] == nil && a.Status == refund.Failed && a.Reason != "":
		case errs[i] != nil && ops.ErrorReason(errs[i]) == "amount_over_remainder":
		default:
			t.Errorf("call %d answered %+v (%v)", i, a, errs[i])
		}
	}
	if won != 3 {
		t.Fatalf("%d calls refunded, want 3", won)
	}
}
