package stripe

import (
	"context"

	"github.com/settle-dev/settle/ops"
)

// Webhooks receives Stripe's webhooks, the account endpoint's and the Connect endpoint's:
// verify, then apply once through the ledger, which lets an event change only operations
// of the tenant whose calls go to the account the event comes from.
type Webhooks struct {
	Adapter *Adapter
	Ledger  *ops.Ledger
	Events  ops.EventStore
}

// Receive verifies the signature and applies the event; a replayed event changes nothing.
func (h *Webhooks) Receive(ctx context.Context, payload []byte, signature string) (ops.Applied, error) {
	ev, err := h.Adapter.ParseWebhook(payload, signature, h.Ledger.Clock.Now())
	if err != nil {
		return ops.Applied{}, err
	}
	return h.Ledger.ApplyEvent(ctx, h.Events, ev)
}
