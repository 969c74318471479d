package web_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/stripe"
)

// unknownCall leaves an LLM call of tenant "shop" at provider "openai" unknown after an
// attempt that timed out: OpenAI may have run and billed it.
func (e *refundEnv) unknownCall(t *testing.T, key string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	tenant := int64(e.count(t, `SELECT id FROM tenants WHERE name = 'shop'`))
	seed := opstest.New(e.ledger, e.db)
	o, err := seed.Open(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key,
		Fingerprint: "fp-" + key, Request: []byte(`{"model": "m1"}`)}, "req-"+key, "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := seed.Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown {
		if op, err = seed.Release(ctx, op, "w1"); err != nil {
			t.Fatal(err)
		}
		if op, err = seed.MarkUnknown(ctx, op, "test", "timed out"); err != nil {
			t.Fatal(err)
		}
	}
	return op
}

// signedRefund returns a refund.updated event of the platform account for refund re in
// status, carrying opID, signed with the account endpoint's secret.
func signedRefund(t *testing.T, eventID, opID, re, status string) ([]byte, string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"id": eventID, "object": "event", "type": "refund.updated",
		"api_version": "2020-08-27", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{"id": re, "object": "refund", "amount": 3800, "currency": "usd",
			"status": status, "payment_intent": "pi_4417", "metadata": map[string]string{stripe.MetadataKey: opID}}}})
	return payload, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: hookSecret, Timestamp: time.Now()}).Header
}

// TestStripeWebhookNeverSettlesAnotherProvidersOperation: two of the tenant's LLM calls at
// OpenAI wait in Unknown after a timeout. Signed Stripe events of the tenant's own account
// announce refunds whose settle_operation_id names them (anyone who can write the
// account's metadata can do so): one canceled, one succeeded. A Stripe refund says nothing
// of what OpenAI ran: the canceled one must not fail a call that may have been billed and
// free its intent for a second send (ops rule 11), the other must not show a call
// succeeded without its provider's word (ops rule 9). Each is answered 200 with
// foreign_provider, so Stripe stops resending it, and is recorded tied to no operation.
func TestStripeWebhookNeverSettlesAnotherProvidersOperation(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	e.ledger.Register(llm.Kind())
	for _, h := range []struct{ key, event, ref, status string }{
		{"call-canceled", "evt_canceled", "re_canceled", "canceled"},
		{"call-succeeded", "evt_succeeded", "re_succeeded", "succeeded"},
	} {
		op := e.unknownCall(t, h.key)
		payload, sig := signedRefund(t, h.event, op.ID, h.ref, h.status)
		if code, out := e.hook(t, payload, sig); code != 200 || out["outcome"] != ops.OutcomeForeignProvider {
			t.Errorf("%s: %d %v, want 200 %s", h.event, code, out, ops.OutcomeForeignProvider)
		}
		if got, _ := e.db.Get(context.Background(), op.ID); got.Status != ops.StatusUnknown || got.Version != op.Version {
			t.Errorf("%s changed the OpenAI call to %s (closed by %q)", h.event, got.Status, got.ClosedBy)
		}
		if n := e.count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = $1 AND operation_id IS NULL AND tenant_id IS NULL`, h.ref); n != 1 {
			t.Errorf("%s: the refund is tied to an operation", h.event)
		}
		if n := e.count(t, `SELECT count(*) FROM provider_events WHERE event_id = $1 AND operation_id IS NULL`, h.event); n != 1 {
			t.Errorf("%s: the event is not recorded, or is tied to an operation", h.event)
		}
	}
}
