package pg_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestARecordOfAnotherAmountDoesNotCloseTheOperation: a refund made by hand at the provider
// whose metadata names an unknown operation of 38.00 USD, but which moved 12.00 USD (or
// 38.00 in another currency), is not that operation's record: closing the operation with it
// would show 38.00 USD refunded on evidence of 12.00 (ops rules 9 and 12). It is recorded as
// the provider's charge tied to no operation, so reconciliation raises it as an orphan, and
// the operation stays unknown until its own record or a person settles it. The record of the
// operation's own amount still closes it.
func TestARecordOfAnotherAmountDoesNotCloseTheOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	u := f.toUnknown(t, "amt-1")
	for _, c := range []struct {
		ref      string
		cents    int64
		currency string
	}{{"re_partial", 1200, "usd"}, {"re_other_currency", 3800, "eur"}} {
		rec := ops.ProviderRecord{Provider: "stripe", Ref: c.ref, OperationID: u.ID, AmountCents: c.cents, Currency: c.currency,
			Status: "succeeded", Created: t0}
		a, err := f.ledger.ApplyRecord(ctx, f.db, rec, ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "test"}, "test")
		if err != nil || a.Outcome != ops.OutcomeOtherAmount {
			t.Fatalf("a record of %d %s for an operation of 3800 usd: %+v %v, want %s", c.cents, c.currency, a, err, ops.OutcomeOtherAmount)
		}
		cur, err := f.db.Get(ctx, u.ID)
		if err != nil || cur.Status != ops.StatusUnknown || cur.ProviderRef != "" {
			t.Fatalf("after a record of %d %s the operation is %+v (%v), want still unknown with no record", c.cents, c.currency, cur, err)
		}
		var tied *string
		if err := f.db.Pool.QueryRow(ctx, `SELECT operation_id::text FROM provider_charges WHERE charge_ref = $1`, c.ref).Scan(&tied); err != nil {
			t.Fatalf("the record %s was not kept as the provider's charge: %v", c.ref, err)
		}
		if tied != nil {
			t.Fatalf("the record %s is tied to operation %s; a charge of another amount must be left for reconciliation as an orphan", c.ref, *tied)
		}
	}
	own := ops.ProviderRecord{Provider: "stripe", Ref: "re_own", OperationID: u.ID, AmountCents: 3800, Currency: "USD",
		Status: "succeeded", Created: t0}
	if a, err := f.ledger.ApplyRecord(ctx, f.db, own, ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "test"}, "test"); err != nil || a.Outcome != "closed" {
		t.Fatalf("the operation's own record (its currency in capitals): %+v %v, want closed", a, err)
	}
}
