package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// TestTenantDaysShowEachTenantsSpendAsItsBudgetCheckReadsIt: the dashboard's tenants page
// reads every tenant's LLM spend of the day in one statement, and each figure is the one
// the tenant's budget check reads (ops rule 8 records each call it refuses): the day's LLM
// operations of that tenant alone, in the price table's currency. A tenant without a budget
// is summed too, so an admin choosing one sees what it spends; its own approval settings
// come with it, and a tenant without any has none.
func TestTenantDaysShowEachTenantsSpendAsItsBudgetCheckReadsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSpendDay(t)
	db, day, shop, bank := f.db, f.day, f.shop, f.bank
	if _, err := db.Pool.Exec(ctx, `UPDATE tenants SET stripe_account = 'acct_1bank' WHERE id = $1`, bank); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenant_approvals (tenant_id, min_mode, min_cents, updated_at) VALUES ($1, 'set', 5000, now())`, bank); err != nil {
		t.Fatal(err)
	}
	days, err := db.TenantDays(ctx, day.Add(5*time.Hour), "usd", ops.SpendBound{})
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 2 || days[0].Tenant.Name != "bank" || days[1].Tenant.Name != "shop" {
		t.Fatalf("TenantDays = %+v, want bank and shop by name", days)
	}
	_, checked, err := db.LLMSpend(ctx, shop, day, "usd")
	if err != nil {
		t.Fatal(err)
	}
	if s := days[1]; s.Spent != checked || s.Spent != 120 || s.Tenant.LLMBudgetMicros != 5000 || s.Approvals != nil {
		t.Errorf("shop: spent %d, budget %d, approvals %+v; want the budget check's %d (120), 5000 and none", s.Spent, s.Tenant.LLMBudgetMicros, s.Approvals, checked)
	}
	if b := days[0]; b.Spent != 900 || b.Tenant.LLMBudgetMicros != 0 || b.Tenant.StripeAccount != "acct_1bank" ||
		b.Approvals == nil || b.Approvals.MinCents == nil || *b.Approvals.MinCents != 5000 || b.Approvals.MinOff {
		t.Errorf("bank: %+v %+v; want 900 spent without a budget, its Stripe account and its threshold of 5000", b.Tenant, b.Approvals)
	}
	if eur, err := db.TenantDays(ctx, day, "eur", ops.SpendBound{}); err != nil || len(eur) != 2 || eur[1].Spent != 4000 || eur[0].Spent != 0 {
		t.Errorf("in euros: %+v, %v; want shop's 4000 and nothing of bank", eur, err)
	}
}

// TestTenantDaysReadsEachSpendOnItsIndex: the tenants page reads every tenant's day in one
// statement (ops rule 8 counts the calls it sums), each on operations_tenant_llm_spend_idx
// as the budget check does, never by walking the operations of every tenant.
func TestTenantDaysReadsEachSpendOnItsIndex(t *testing.T) {
	t.Parallel()
	text := planOf(t, pg.TenantDaysQuery, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), "usd", ops.DefaultSpendBound.Calls)
	if !strings.Contains(text, "operations_tenant_llm_spend_idx") {
		t.Errorf("the tenants' spend is not read on its index:\n%s", text)
	}
}
