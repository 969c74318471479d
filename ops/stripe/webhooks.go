package stripe

import (
	"context"

	"github.com/settle-dev/settle/ops"
)

// Webhooks receives Stripe's webhooks: verify, then apply once through the ledger.
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
