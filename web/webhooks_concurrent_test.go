package web_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// TestOneEventDeliveredEightTimesAtOnceClosesOnce: Stripe (or a proxy in front of Settle)
// delivers the same signed refund.created eight times at once for an unknown operation. Each
// delivery is answered 200, the operation is closed once, with one evidence row, one audit
// entry of its close and one recorded event.
// ops rule 6: closing is a compare-and-set; two closes at once close once.
func TestOneEventDeliveredEightTimesAtOnceClosesOnce(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	e.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Times: 1})
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 || out["status"] != "checking" {
		t.Fatalf("%d %v, want checking", code, out)
	}
	opID := out["operation_id"].(string)
	payload, sig := signed(t, "evt_twice", opID, "re_from_hook", time.Now())
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = e.hook(t, payload, sig)
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("delivery %d answered %d, want 200", i, c)
		}
	}
	op, _ := e.db.Get(context.Background(), opID)
	if op.Status != ops.StatusSucceeded || op.ProviderRef != "re_from_hook" {
		t.Fatalf("after eight deliveries the operation is %s %s", op.Status, op.ProviderRef)
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'webhook'`:                          1,
		`SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'close'`:                            1,
		`SELECT count(*) FROM provider_events WHERE event_id = 'evt_twice' AND $1 <> ''`:                      1,
		`SELECT count(*) FROM provider_charges WHERE charge_ref = 're_from_hook' AND operation_id = $1::uuid`: 1,
	} {
		if n := e.count(t, q, opID); n != want {
			t.Errorf("%s: %d, want %d", q, n, want)
		}
	}
}
