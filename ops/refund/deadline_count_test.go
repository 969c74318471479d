package refund_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// TestARefundRefusedAtItsDeadlineIsStillCounted: the remainder check reads Stripe, and a
// read slower than the call's deadline refuses the request before any operation opens. The
// refusal is recorded even though the call's own context has run out by then: every client
// request is counted, the refused ones too (ops rule 8).
func TestARefundRefusedAtItsDeadlineIsStillCounted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2*time.Second, 300*time.Millisecond)
	w.Fake.AddFault(fake.Fault{Method: "GET", Path: "/v1/*", Kind: fake.FaultSlow, Delay: time.Second})
	_, err := w.Refunds.Refund(context.Background(), w.Req("slow-read-1"))
	if err == nil {
		t.Fatal("a refund whose remainder read outlasted its deadline was answered without an error")
	}
	if n := w.Count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'slow-read-1'`); n != 1 {
		t.Fatalf("the refused request was recorded %d times, want once (%v)", n, err)
	}
	if n := w.Count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations opened for a request refused before its opening", n)
	}
}
