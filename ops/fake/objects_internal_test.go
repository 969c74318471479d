package fake

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// A listed refund is written exactly as the refund object everywhere else: every field,
// null where empty, in the same order.
func TestListedRefundEncodesAsTheRefundObject(t *testing.T) {
	at := time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []Refund{
		{ID: "re_1", Amount: 3800, Currency: "usd", Status: "succeeded", Created: at},
		{ID: "re_2", PaymentIntent: "pi_2", Charge: "ch_2", Currency: "jpy", Status: "failed", Reason: "duplicate",
			FailureReason: "expired_or_canceled_card", Amount: 500, Created: at,
			Metadata: map[string]string{"settle_operation_id": "x", "a<b>": "\"quoted\" & <tagged>"}},
		{ID: "re_3", PaymentIntent: "pi_3", Currency: "eur", Status: "pending", Amount: 1, Created: at, Metadata: map[string]string{}},
	} {
		want, err := json.Marshal(refundObject(&r))
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(listedRefundOf(&r))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s listed as\n%s\nwritten elsewhere as\n%s", r.ID, got, want)
		}
	}
}
