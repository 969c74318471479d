package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestTenantStripeAccount: 'settle tenant stripe-account' binds an existing tenant, shows
// the binding in 'tenant list', refuses a malformed id (exit 2) and an unknown tenant
// (exit 1) in one line without changing anything, and --clear unbinds.
func TestTenantStripeAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars, db := tenantShop(t)
	account := func() string {
		t.Helper()
		var a string
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(stripe_account, '') FROM tenants WHERE name = 'shop'`).Scan(&a); err != nil {
			t.Fatal(err)
		}
		return a
	}

	code, stdout, stderr := run(t, []string{"tenant", "stripe-account", "shop", "acct_1Shop"}, vars, "")
	if code != 0 || !strings.Contains(stdout, "bound to Stripe account acct_1Shop") || account() != "acct_1Shop" {
		t.Fatalf("bind: exit %d %q %q, account %q", code, stdout, stderr, account())
	}
	if code, stdout, _ = run(t, []string{"tenant", "list"}, vars, ""); code != 0 || !strings.Contains(stdout, "shop") || !strings.Contains(stdout, "acct_1Shop") {
		t.Fatalf("tenant list: exit %d\n%s", code, stdout)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tenant", "stripe-account", "shop", "acct_bad-id"}, 2, "is not one"},
		{[]string{"tenant", "stripe-account", "shop", "1Shop"}, 2, "acct_"},
		{[]string{"tenant", "stripe-account", "shop"}, 2, "--clear to unbind"},
		{[]string{"tenant", "stripe-account", "shop", "acct_2", "--clear"}, 2, "not both"},
		{[]string{"tenant", "stripe-account"}, 2, "name the tenant"},
		{[]string{"tenant", "stripe-account", "shop", "acct_2", "extra"}, 2, "unexpected argument"},
		{[]string{"tenant", "stripe-account", "shop", "acct_2", "--force"}, 2, "flag provided but not defined"},
		{[]string{"tenant", "rename"}, 2, "unknown command"},
		{[]string{"tenant", "stripe-account", "nobody", "acct_2"}, 1, "No tenant nobody"},
	} {
		code, stdout, stderr := run(t, tc.args, vars, "")
		if code != tc.code || stdout != "" || !strings.HasPrefix(stderr, "settle: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("settle %v: exit %d, stderr %q; want %d and one line with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if account() != "acct_1Shop" {
		t.Fatalf("a refused command changed the binding to %q", account())
	}
	var nobody int
	_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE name = 'nobody'`).Scan(&nobody)
	if nobody != 0 {
		t.Fatal("binding an unknown tenant created it")
	}

	// Another tenant cannot take the account.
	if _, err := db.EnsureTenant(ctx, "bank"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, []string{"tenant", "stripe-account", "bank", "acct_1Shop"}, vars, "")
	if code != 1 || !strings.Contains(stderr, "bound to tenant shop") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("another tenant's account: exit %d %q", code, stderr)
	}

	// --clear unbinds, before or after the name; a second time it changes nothing.
	code, stdout, stderr = run(t, []string{"tenant", "stripe-account", "--clear", "shop"}, vars, "")
	if code != 0 || !strings.Contains(stdout, "no longer bound to acct_1Shop") || account() != "" {
		t.Fatalf("unbind: exit %d %q %q, account %q", code, stdout, stderr, account())
	}
	if code, stdout, _ = run(t, []string{"tenant", "stripe-account", "shop", "--clear"}, vars, ""); code != 0 || !strings.Contains(stdout, "nothing changed") {
		t.Fatalf("unbind again: exit %d %q", code, stdout)
	}
	var audited int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'tenant.stripe_account' AND actor = 'cli'`).Scan(&audited); err != nil || audited != 2 {
		t.Fatalf("%d binding changes audited (%v), want 2", audited, err)
	}
}

// TestTenantStripeAccountWaitsForOpenRefunds: a tenant with a refund still open keeps its
// binding: the command says so in one line and exits 1.
func TestTenantStripeAccountWaitsForOpenRefunds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := pgtest.NewWithURL(t)
	shop, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	ledger := ops.NewLedger(db, ops.SystemClock{})
	registerKinds(ledger, false)
	if _, err := ledger.Admit(ctx, ops.Intent{TenantID: shop.ID, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "1|100|usd",
		Fingerprint: "fp", OrderRef: "1", PaymentRef: "pi_1", AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour,
		RequestRef: "req-1", Owner: "w1"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, []string{"tenant", "stripe-account", "shop", "acct_1Shop"}, map[string]string{"DATABASE_URL": url}, "")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "1 open Stripe operations") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("bind with an open refund: exit %d %q %q", code, stdout, stderr)
	}
}

// tenantShop is a new database holding tenant shop, made as an operator makes one (its
// first token), with the variables that point the commands at it and a handle to read it.
func tenantShop(t *testing.T) (map[string]string, *pg.DB) {
	t.Helper()
	url := pgtest.URL(pgtest.NewDatabase(t))
	vars := map[string]string{"DATABASE_URL": url}
	if code, _, stderr := run(t, []string{"token", "add", "--tenant", "shop"}, vars, ""); code != 0 {
		t.Fatalf("token add: %s", stderr)
	}
	db, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return vars, db
}
