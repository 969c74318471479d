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
)

// TestRetriesWhileALookupClosesTheRefundAnswerIt: the first call timed out after Stripe
// made the refund; a person's lookup on the dashboard then closes the operation with
// Stripe's record while the client's retries resume it with the same key. Whichever comes
// first, the lookup says what it found (closed, in flight or already closed) instead of
// failing on the retry's change (ops rule 6), every retry is answered with the refund or
// unconfirmed, never an error, and Stripe holds one refund (ops rule 3).
func TestRetriesWhileALookupClosesTheRefundAnswerIt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Second, time.Second)
	w.Fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{1}, Kind: fake.FaultTimeoutAfterCommit, Delay: 1500 * time.Millisecond})
	ctx := context.Background()
	first, err := w.Refunds.Refund(ctx, w.Req("toolu_01"))
	if err != nil || first.Status != refund.Unconfirmed {
		t.Fatalf("first call: %+v %v", first, err)
	}
	time.Sleep(700 * time.Millisecond) // the fake has answered its held request
	const n = 4
	answers := make([]refund.Answer, n)
	errs := make([]error, n)
	var lookup ops.Applied
	var lerr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		_, lookup, lerr = w.Refunds.Lookup(ctx, w.DB, first.OperationID, "oncall@example.com")
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], errs[i] = w.Refunds.Refund(ctx, w.Req(fmt.Sprintf("toolu_1%d", i)))
		}()
	}
	close(start)
	wg.Wait()
	if lerr != nil || (lookup.Outcome != "closed" && lookup.Outcome != "in_flight" && lookup.Outcome != "already_closed") {
		t.Fatalf("lookup: %s (%v)", lookup.Outcome, lerr)
	}
	for i, a := range answers {
		if errs[i] != nil || (a.Status != refund.Refunded && a.Status != refund.Unconfirmed) || a.OperationID != first.OperationID {
			t.Errorf("retry %d answered %+v (%v)", i, a, errs[i])
		}
	}
	if got := len(w.Fake.Refunds()); got != 1 {
		t.Fatalf("%d refunds at Stripe, want 1", got)
	}
	op, err := w.DB.Get(ctx, first.OperationID)
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("operation %+v (%v), lookup %s", op, err, lookup.Outcome)
	}
}
