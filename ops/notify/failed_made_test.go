package notify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/notify"
	"github.com/settle-dev/settle/ops/outbox"
)

// TestTheNotificationOfAFailedRefundNamesAnotherRefundOfItThatWasMade defends ops rule 12:
// the follow-up notification of a refund that failed after it succeeded, while a double
// refund of the same operation moved money, sends the customer that refund as on its way,
// never "no money was moved".
func TestTheNotificationOfAFailedRefundNamesAnotherRefundOfItThatWasMade(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.closeFound(t, w.unknownRefund(t, "6120"), "re_first6120")
	ev := ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.updated"}
	for _, rec := range []ops.ProviderRecord{
		{Provider: "stripe", Ref: "re_second6120", OperationID: op.ID, AmountCents: 3800, Currency: "usd", Status: "succeeded"},
		{Provider: "stripe", Ref: "re_first6120", OperationID: op.ID, AmountCents: 3800, Currency: "usd", Status: "failed"},
	} {
		if _, err := w.ledger.ApplyRecord(ctx, w.db, rec, ev, "webhook"); err != nil {
			t.Fatal(err)
		}
	}
	m, err := notify.Compose(ctx, w.db, w.ledger, outbox.Event{EventID: "ev-6120", Payload: []byte(`{"operation_id":"` + op.ID + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.Text, "no money was moved") || !strings.Contains(m.Sentence, "re_second6120") || !strings.Contains(m.Sentence, "on its way") {
		t.Fatalf("the notification of a failed refund with another made reads %q", m.Text)
	}
}
