package pg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestAStripeOperationRecordsTheAccountItIsOpenedFor: the statement that opens a Stripe
// operation records its tenant's account then (acct_A when bound, "" for the platform), and
// the reconciler is told acct_A holds refunds of the window. An operation opened before
// accounts were recorded (NULL) is judged by its tenant's current binding, as before: a
// record from another account changes nothing, one from the bound account closes it
// (ops rule 9).
func TestAStripeOperationRecordsTheAccountItIsOpenedFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	beta, err := f.db.EnsureTenant(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	platform, err := f.seed().Open(ctx, ops.Intent{TenantID: beta.ID, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: "p:1:usd", Fingerprint: "fp-p", AmountCents: 1, Currency: "usd", PaymentRef: "pi_2"}, "req-p", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if acct, ok := platform.Op.SentAccount(); !ok || acct != "" {
		t.Fatalf("an unbound tenant's operation records %q (%v), want the platform account", acct, ok)
	}
	if _, err := f.db.SetStripeAccount(ctx, "acme", "acct_A", "cli", t0); err != nil {
		t.Fatal(err)
	}
	u := f.toUnknown(t, "900")
	if cur, _ := f.db.Get(ctx, u.ID); cur == nil || cur.StripeAccount == nil || *cur.StripeAccount != "acct_A" {
		t.Fatalf("the bound tenant's operation records %v, want acct_A", cur.StripeAccount)
	}
	if accts, err := f.db.SentStripeAccounts(ctx, t0.Add(-time.Hour), t0.Add(time.Hour)); err != nil || !slices.Equal(accts, []string{"acct_A"}) {
		t.Fatalf("SentStripeAccounts = %v, %v, want [acct_A]", accts, err)
	}

	if _, err := f.db.Pool.Exec(ctx, `UPDATE operations SET stripe_account = NULL WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	rec := ops.ProviderRecord{Provider: "stripe", Ref: "re_1", OperationID: u.ID, AmountCents: 3800, Currency: "usd",
		Status: "succeeded", Created: t0}
	for _, c := range []struct{ account, want string }{{"acct_Z", ops.OutcomeForeignAccount}, {"acct_A", "closed"}} {
		account, want := c.account, c.want
		rec.Account, rec.Ref = account, "re_"+account
		if a, err := f.ledger.ApplyRecord(ctx, f.db, rec, ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "test"}, "test"); err != nil || a.Outcome != want {
			t.Fatalf("a record of %s for an operation with no recorded account: %+v %v, want %s", account, a, err, want)
		}
	}
}
