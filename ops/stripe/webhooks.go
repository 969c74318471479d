package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

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

// webhookTolerance is how old a webhook's signature may be: Stripe's own default.
const webhookTolerance = 300 * time.Second

// ParseWebhook verifies a webhook's signature (300 s tolerance) and turns it into a
// provider event. Events of another API version are accepted: Settle reads only the
// refund's id, amount, currency, status, payment intent and metadata, and the event's
// account. A refund that names no payment intent is judged without it.
func (a *Adapter) ParseWebhook(payload []byte, signature string, now time.Time) (ops.ProviderEvent, error) {
	err := errors.New("no webhook signing secret is configured")
	for _, secret := range []string{a.cfg.WebhookSecret, a.cfg.ConnectWebhookSecret} {
		if secret == "" {
			continue
		}
		if err = webhook.ValidatePayloadWithTolerance(payload, signature, secret, webhookTolerance); err == nil {
			break
		}
	}
	if err != nil {
		return ops.ProviderEvent{}, &ops.Error{Code: ops.EUNAUTHORIZED, Reason: "bad_signature", Message: "The webhook signature does not verify.", Err: err}
	}
	// Read only once the signature verified: a signed body that is no event is the sender's
	// mistake, not a wrong secret, and is answered so (ops rule 12).
	var ev stripego.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		return ops.ProviderEvent{}, &ops.Error{Code: ops.EINVALID, Reason: "bad_event", Message: "The signature verifies, but the body is not a Stripe event in JSON.", Err: err}
	}
	// A Connect event names the connected account it happened in; the ledger lets it change
	// only the operations of the tenant bound to that account.
	out := ops.ProviderEvent{Provider: "stripe", ID: ev.ID, Type: string(ev.Type), Payload: payload, ReceivedAt: now, Account: ev.Account}
	switch ev.Type {
	case "refund.created", "refund.updated", "refund.failed", "charge.refund.updated":
		// charge.refund.updated carries the refund itself, as refund.updated does; an
		// endpoint subscribed to it hears a refund's later failure only from it (ops rules 9 and 12).
		var r stripego.Refund
		if err := json.Unmarshal(ev.Data.Raw, &r); err != nil {
			return out, &ops.Error{Code: ops.EINVALID, Reason: "bad_event", Message: "The refund in the event cannot be read.", Err: err}
		}
		rec := Record(&r)
		rec.Account = ev.Account
		out.Record = &rec
	case "charge.refunded":
		// The charge lists its refunds; the newest is the one this event announces.
		var c stripego.Charge
		if err := json.Unmarshal(ev.Data.Raw, &c); err != nil {
			return out, &ops.Error{Code: ops.EINVALID, Reason: "bad_event", Message: "The charge in the event cannot be read.", Err: err}
		}
		if c.Refunds != nil && len(c.Refunds.Data) > 0 {
			rec := Record(c.Refunds.Data[0])
			rec.Account = ev.Account
			if rec.PaymentRef == "" && c.PaymentIntent != nil {
				rec.PaymentRef = c.PaymentIntent.ID
			}
			out.Record = &rec
		}
	}
	return out, nil
}
