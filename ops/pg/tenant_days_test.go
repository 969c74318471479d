package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
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
	db := pgtest.New(t)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var shop, bank int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name, llm_budget_micros) VALUES ('shop', 5000) RETURNING id`).Scan(&shop); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name, stripe_account) VALUES ('bank', 'acct_1bank') RETURNING id`).Scan(&bank); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenant_approvals (tenant_id, min_mode, min_cents, updated_at) VALUES ($1, 'set', 5000, now())`, bank); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		tenant int64
		kind   string
		cost   int64
		usage  string
		at     time.Time
	}{
		{shop, "llm_call", 100, `{"cost_micros": 100}`, day.Add(time.Hour)},
		{shop, "llm_job", 20, `{"currency": "usd", "cost_micros": 20}`, day.Add(2 * time.Hour)},
		{shop, "llm_call", 4000, `{"currency": "eur", "cost_micros": 4000}`, day.Add(time.Hour)},
		{shop, "llm_call", 300, `{"cost_micros": 300}`, day.Add(-time.Minute)},
		{shop, "refund", 7, `{}`, day.Add(time.Hour)},
		{bank, "llm_call", 900, `{"cost_micros": 900}`, day.Add(time.Hour)},
	} {
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
VALUES ($1::uuid, $2, $3, 'fakellm', $1::text, $1::text, 'fp', 0, '', $4, $5::jsonb, 'succeeded', $6, $6, $6)`,
			id, o.tenant, o.kind, o.cost, o.usage, o.at); err != nil {
			t.Fatal(err)
		}
	}
	days, err := db.TenantDays(ctx, day.Add(5*time.Hour), "usd")
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
	if eur, err := db.TenantDays(ctx, day, "eur"); err != nil || len(eur) != 2 || eur[1].Spent != 4000 || eur[0].Spent != 0 {
		t.Errorf("in euros: %+v, %v; want shop's 4000 and nothing of bank", eur, err)
	}
}

// TestTenantDaysReadsEachSpendOnItsIndex: the tenants page reads every tenant's day in one
// statement (ops rule 8 counts the calls it sums), each on operations_tenant_llm_spend_idx
// as the budget check does, never by walking the operations of every tenant.
func TestTenantDaysReadsEachSpendOnItsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// An empty table is scanned whole whatever its indexes: the plan is asked as it would
	// be of a table too large for that.
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `RESET enable_seqscan`)
	rows, err := conn.Query(ctx, `EXPLAIN `+pg.TenantDaysQuery, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), "usd")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(lines, "\n"); !strings.Contains(text, "operations_tenant_llm_spend_idx") {
		t.Errorf("the tenants' spend is not read on its index:\n%s", text)
	}
}
