package web_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/stripe"
)

// TestALookupDoesNotCloseARefundWithAHandMadeRecordOfAnotherAmount: someone refunded 5.00
// USD by hand at Stripe and copied the settle_operation_id of an unknown refund of 12.00
// USD onto it. The lookup from the dashboard finds that record and must not close the
// operation with it, which would show 12.00 USD refunded on evidence of 5.00 (ops rules 9
// and 12): the person is told what the record is, and the operation stays unknown.
func TestALookupDoesNotCloseARefundWithAHandMadeRecordOfAnotherAmount(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.notSentUnknown(t, "7101")
	if err := e.fake.ImportRefunds([]fake.Refund{{ID: "re_by_hand", PaymentIntent: op.PaymentRef, Currency: "usd",
		Status: "succeeded", Amount: 500, Metadata: map[string]string{stripe.MetadataKey: op.ID}, Created: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	e.post(t, c, "/ops/"+op.ID+"/lookup", nil)
	if got := e.get(t, op.ID); got.Status != ops.StatusUnknown || got.ProviderRef != "" {
		t.Fatalf("after a lookup that found only a hand-made refund of 5.00 USD: %s with %q, want unknown with no record", got.Status, got.ProviderRef)
	}
	_, body := e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-outcome="not_its_record"`, "re_by_hand", "moved 5.00 USD, not the 12.00 USD this operation refunds",
		"orphan charge")
}
