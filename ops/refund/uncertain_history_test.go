package refund_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/refund"
)

// TestTryAgainAfterATimeoutAndA429RefundsOnce: Stripe commits the first attempt's refund
// but its answer is lost, and the resend gets a 429 whose Retry-After outlasts the call.
// The last attempt is the 429, but the first may have refunded: the customer's "try again"
// goes on with the same operation and its one key, which Stripe answers with the refund it
// made, so nothing is refunded twice however the history ends (ops rules 1 and 3).
func TestTryAgainAfterATimeoutAndA429RefundsOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, 3*time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 2 * time.Second})
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{2}, Kind: fake.FaultRateLimit, RetryAfter: 30})
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil || first.Status != refund.Unconfirmed {
		t.Fatalf("first call: %+v %v, want unconfirmed", first, err)
	}
	var outcomes string
	_ = w.DB.Pool.QueryRow(ctx, `SELECT string_agg(outcome, ',' ORDER BY n) FROM attempts`).Scan(&outcomes)
	if outcomes != "timeout,rate_limited" {
		t.Fatalf("attempts %s, want a timeout then a 429", outcomes)
	}
	time.Sleep(1200 * time.Millisecond) // the first request finishes at the fake
	second, err := w.Refunds.Refund(ctx, w.Req("toolu_02"))
	if err != nil || second.Status != refund.Refunded || second.OperationID != first.OperationID {
		t.Fatalf("second call: %+v %v, want refunded on operation %s", second, err, first.OperationID)
	}
	if n := len(w.Fake.Refunds()); n != 1 || second.RefundID != w.Fake.Refunds()[0].ID {
		t.Fatalf("the fake holds %d refunds, want the first attempt's", n)
	}
	if n := w.Count(t, `SELECT count(DISTINCT provider_key) FROM attempts`); n != 1 {
		t.Fatalf("%d provider keys used, want 1", n)
	}
}
