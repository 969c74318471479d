package recon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/stripe"
)

// unknownCall leaves an LLM call of the world's tenant at provider "openai" unknown after
// an attempt that timed out: the provider may have run and billed it.
func (w *world) unknownCall(t *testing.T, key string) *ops.Operation {
	t.Helper()
	o, err := w.seed().Open(context.Background(), ops.Intent{TenantID: w.tenant, Kind: ops.KindLLMCall, Provider: "openai",
		IntentKey: key, Fingerprint: "fp-" + key, Request: []byte(`{"model": "m1"}`)}, "req-"+key, "w1")
	if err != nil {
		t.Fatal(err)
	}
	return w.toUnknown(t, o, ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"})
}

// TestStripeRefundsNeverSettleAnotherProvidersOperation: two LLM calls at OpenAI wait in
// Unknown after a timeout. Refunds in the tenant's own Stripe account carry their ids in
// settle_operation_id (anyone who can write the account's metadata can do so): one went
// through, the other was canceled. A Stripe refund says nothing of what OpenAI ran, so
// reconciliation closes neither: the canceled one would free an intent whose attempt may
// have been billed (ops rule 11), the other would show a call succeeded without its
// provider's word (ops rule 9). Both refunds are the account's orphans, tied to no
// operation, so neither counts as a charge of the calls (ops rule 3).
func TestStripeRefundsNeverSettleAnotherProvidersOperation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.ledger.Register(llm.Kind())
	ctx := context.Background()
	billed, freed := w.unknownCall(t, "call-1"), w.unknownCall(t, "call-2")
	went := w.outsideRefund(t, 700, map[string]string{stripe.MetadataKey: billed.ID})
	canceled := w.outsideRefund(t, 800, map[string]string{stripe.MetadataKey: freed.ID})
	if err := w.fake.SetRefundStatus(canceled.ID, "canceled", ""); err != nil {
		t.Fatal(err)
	}

	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []*ops.Operation{billed, freed} {
		if got, _ := w.db.Get(ctx, op.ID); got.Status != ops.StatusUnknown || got.Version != op.Version {
			t.Errorf("a Stripe refund changed the OpenAI call %s to %s (closed by %q)", op.ID, got.Status, got.ClosedBy)
		}
	}
	if rep.Closed != 0 || rep.Orphans != 1 {
		t.Errorf("run: %s, want nothing closed and the refund that went through an orphan", rep.Summary())
	}
	for _, ref := range []string{went.ID, canceled.ID} {
		if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = $1 AND operation_id IS NULL AND tenant_id IS NULL`, ref); n != 1 {
			t.Errorf("the refund %s is tied to an operation", ref)
		}
	}
	var summary string
	if err := w.db.Pool.QueryRow(ctx, `SELECT summary FROM recon_exceptions WHERE kind = 'orphan_charge' AND ref = $1`, went.ID).Scan(&summary); err != nil {
		t.Fatalf("no orphan exception for %s: %v", went.ID, err)
	}
	if !strings.Contains(summary, billed.ID) || !strings.Contains(summary, "not an operation at stripe") {
		t.Errorf("the orphan's summary %q does not say the operation it names is not Stripe's", summary)
	}
}
