package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestOnlyAStripeOpeningLocksItsTenant: an LLM call's admission and close write nothing
// that locks its tenant's row, so they go through while a Stripe binding holds that row
// (SetStripeAccount locks it FOR UPDATE), and the hot tenant row costs no lock record, no
// multixact and no foreign-key check per call. A Stripe operation's opening still takes
// its key-share lock and waits for the binding, so no Stripe operation opens between the
// binding's count of open operations and its change (ops rule 9's account).
func TestOnlyAStripeOpeningLocksItsTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, f.tenant); err != nil {
		t.Fatal(err)
	}
	type closed struct {
		op  *ops.Operation
		err error
	}
	call := make(chan closed, 1)
	go func() {
		in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: "k1", Fingerprint: "fp",
			Request: []byte(`{"policy":"interactive","route":"/v1/responses","body":{"model":"gpt-5-mini"}}`), Retention: 24 * time.Hour}
		o, err := f.seed().Open(ctx, in, "req-1", "gw")
		if err != nil {
			call <- closed{err: err}
			return
		}
		op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
			Result: &ops.Result{ProviderRef: "resp_1", Body: []byte(`{"id":"resp_1"}`)}})
		call <- closed{op, err}
	}()
	select {
	case c := <-call:
		if c.err != nil || c.op.Status != ops.StatusSucceeded {
			t.Fatalf("the call during the binding: %+v (%v)", c.op, c.err)
		}
		if n := f.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1`, c.op.ID); n != 1 {
			t.Fatalf("the call's close recorded %d charges, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an LLM call waited for its tenant's row, locked by a Stripe binding")
	}
	refund := make(chan error, 1)
	go func() {
		_, err := f.seed().Open(ctx, f.refund("during-binding", 100), "r1", "w")
		refund <- err
	}()
	select {
	case err := <-refund:
		t.Fatalf("a Stripe refund opened while its tenant's binding was changing (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-refund; err != nil {
		t.Fatalf("the refund after the binding: %v", err)
	}
}

// TestAnOpeningForNoTenantIsRefused: with no foreign key into tenants, the opening's own
// statement is what refuses a tenant that does not exist, for every kind, as the key did:
// the request is invalid and nothing is written.
func TestAnOpeningForNoTenantIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	refund := f.refund("nobody", 100)
	refund.TenantID = f.tenant + 1000
	call := ops.Intent{TenantID: f.tenant + 1000, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: "k1", Fingerprint: "fp",
		Request: []byte(`{"policy":"interactive","route":"/v1/responses","body":{"model":"gpt-5-mini"}}`), Retention: 24 * time.Hour}
	for _, in := range []ops.Intent{refund, call} {
		if _, err := f.seed().Open(ctx, in, "req-1", "w"); ops.ErrorCode(err) != ops.EINVALID {
			t.Errorf("%s for no tenant: %v, want %s", in.Kind, err, ops.EINVALID)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM operations`) + f.count(t, `SELECT count(*) FROM client_requests`); n != 0 {
		t.Fatalf("an opening for no tenant wrote %d rows", n)
	}
}
