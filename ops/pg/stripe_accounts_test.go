package pg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestStripeAccountBinding: a tenant is bound to one connected account, unbound with "",
// and every change is audited once. A malformed id, an unknown tenant, an account another
// tenant holds and a tenant with an open Stripe operation are refused and change nothing.
func TestStripeAccountBinding(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	b, err := f.db.SetStripeAccount(ctx, "acme", "acct_1A2b3C", "cli", t0)
	if err != nil || !b.Changed || b.Before != "" || b.Tenant.StripeAccount != "acct_1A2b3C" {
		t.Fatalf("bind: %+v %v", b, err)
	}
	if acct, err := f.db.StripeAccountOf(ctx, f.tenant); err != nil || acct != "acct_1A2b3C" {
		t.Fatalf("StripeAccountOf = %q, %v", acct, err)
	}
	if acct, err := f.db.ProviderAccount(ctx, f.tenant, "openai"); err != nil || acct != "" {
		t.Fatalf("another provider's account = %q, %v; Stripe's binding is Stripe's only", acct, err)
	}
	tok, _ := f.db.CreateToken(ctx, f.tenant, "t")
	if tn, err := f.db.TenantByToken(ctx, tok); err != nil || tn.StripeAccount != "acct_1A2b3C" {
		t.Fatalf("the token's tenant: %+v %v", tn, err)
	}
	if b, err := f.db.SetStripeAccount(ctx, "acme", "acct_1A2b3C", "cli", t0); err != nil || b.Changed {
		t.Fatalf("binding again: %+v %v, want nothing changed", b, err)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'tenant.stripe_account' AND actor = 'cli' AND entity_id = $1::bigint::text
		AND after->>'stripe_account' = 'acct_1A2b3C' AND before->>'stripe_account' IS NULL`, f.tenant); n != 1 {
		t.Fatalf("%d audit rows for the binding, want 1", n)
	}

	if _, err := f.db.EnsureTenant(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.SetStripeAccount(ctx, "beta", "acct_1A2b3C", "cli", t0); ops.ErrorCode(err) != ops.ECONFLICT || !strings.Contains(ops.ErrorMessage(err), "acme") {
		t.Fatalf("another tenant's account: %v, want a conflict naming acme", err)
	}
	for _, bad := range []string{"acct_", "acct_1A-2b", "ACCT_1A2b", "1A2b", "acct_1A2b\nx", " acct_1A2b"} {
		if _, err := f.db.SetStripeAccount(ctx, "beta", bad, "cli", t0); ops.ErrorCode(err) != ops.EINVALID || strings.Contains(ops.ErrorMessage(err), "\n") {
			t.Errorf("account %q: %v, want one invalid line", bad, err)
		}
	}
	if _, err := f.db.Pool.Exec(ctx, `UPDATE tenants SET stripe_account = 'acct_x y' WHERE name = 'beta'`); err == nil {
		t.Fatal("the schema took a malformed account id")
	}
	if _, err := f.db.SetStripeAccount(ctx, "nobody", "acct_9", "cli", t0); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Fatalf("unknown tenant: %v", err)
	}
	if accounts, err := f.db.StripeAccounts(ctx); err != nil || len(accounts) != 1 || accounts["acct_1A2b3C"] != f.tenant {
		t.Fatalf("StripeAccounts = %v, %v", accounts, err)
	}

	// An open operation keeps its account: resends and lookups must go where it was sent.
	op := f.toUnknown(t, "1")
	_, err = f.db.SetStripeAccount(ctx, "acme", "", "cli", t0)
	if ops.ErrorCode(err) != ops.ECONFLICT || !strings.Contains(ops.ErrorMessage(err), "1 open Stripe operations") {
		t.Fatalf("unbinding with an open operation: %v", err)
	}
	if acct, _ := f.db.StripeAccountOf(ctx, f.tenant); acct != "acct_1A2b3C" {
		t.Fatalf("a refused unbinding changed the account to %q", acct)
	}
	if _, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_1", Summary: "Found it."}}); err != nil {
		t.Fatal(err)
	}
	b, err = f.db.SetStripeAccount(ctx, "acme", "", "cli", t0)
	if err != nil || !b.Changed || b.Before != "acct_1A2b3C" || b.Tenant.StripeAccount != "" {
		t.Fatalf("unbind: %+v %v", b, err)
	}
	if acct, err := f.db.StripeAccountOf(ctx, f.tenant); err != nil || acct != "" {
		t.Fatalf("after unbinding: %q, %v", acct, err)
	}
	// The account is free for another tenant now.
	if b, err := f.db.SetStripeAccount(ctx, "beta", "acct_1A2b3C", "cli", t0); err != nil || !b.Changed {
		t.Fatalf("bind the freed account to beta: %+v %v", b, err)
	}
}
