package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestTenantDaysStopsSummingABusyTenantAtItsBound: a tenant with more calls today than the
// read's bound has a floor of its spend, said to be one (ops.SpendAtLeast), while every other
// tenant's figure is still whole and equal to what its budget check reads (ops rule 8 counts
// each call the check refuses): one busy tenant neither holds the page nor hides the others.
func TestTenantDaysStopsSummingABusyTenantAtItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSpendDay(t)
	var busy int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name, llm_budget_micros) VALUES ('busy', 1000000) RETURNING id`).Scan(&busy); err != nil {
		t.Fatal(err)
	}
	// A day of 2,000 calls of 7 micro-units each, the last one ten minutes before the read.
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
SELECT id, $1, 'llm_call', 'fakellm', id::text, id::text, 'fp', 0, '', 7, '{"cost_micros": 7}', 'succeeded', at, at, at
FROM (SELECT gen_random_uuid() AS id, $2::timestamptz + n * interval '10 seconds' AS at FROM generate_series(1, 2000) n) c`,
		busy, f.day); err != nil {
		t.Fatal(err)
	}
	now := f.day.Add(6 * time.Hour)
	days, err := f.db.TenantDays(ctx, now, "usd", ops.SpendBound{Calls: 500, Time: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 3 || days[1].Tenant.Name != "busy" {
		t.Fatalf("TenantDays = %+v, want bank, busy and shop", days)
	}
	if b := days[1]; b.Read != ops.SpendAtLeast || b.Spent != 501*7 || b.Tenant.LLMBudgetMicros != 1000000 {
		t.Errorf("busy: read %d, spent %d; want a floor (%d) of the 501 calls read, 3507", b.Read, b.Spent, ops.SpendAtLeast)
	}
	_, checked, err := f.db.LLMSpend(ctx, f.shop, now, "usd")
	if err != nil {
		t.Fatal(err)
	}
	// The budget check reads no tenant without a budget: bank's day is its one call of 900.
	for d, want := range map[ops.TenantDay]int64{days[0]: 900, days[2]: checked} {
		if d.Read != ops.SpendWhole || d.Spent != want {
			t.Errorf("%s: read %d, spent %d; want the whole day, %d", d.Tenant.Name, d.Read, d.Spent, want)
		}
	}
	whole, err := f.db.TenantDays(ctx, now, "usd", ops.SpendBound{})
	if err != nil {
		t.Fatal(err)
	}
	_, checked, err = f.db.LLMSpend(ctx, busy, now, "usd")
	if err != nil {
		t.Fatal(err)
	}
	if b := whole[1]; b.Read != ops.SpendWhole || b.Spent != checked || checked != 2000*7 {
		t.Errorf("busy under the default bound: read %d, spent %d; want the whole day, the budget check's %d (14000)", b.Read, b.Spent, checked)
	}
}

// TestTenantDaysOutOfTimeListsTheTenantsWithoutASpend: when the spends cannot be read within
// the bound's time (the operations table is held here, as a long read holds the page), the
// tenants still come, with their budgets and settings, each spend said to be unread rather
// than given as nothing spent (ops rule 12), and soon after the bound.
func TestTenantDaysOutOfTimeListsTheTenantsWithoutASpend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSpendDay(t)
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE operations IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	read, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	days, err := f.db.TenantDays(read, f.day, "usd", ops.SpendBound{Time: 200 * time.Millisecond})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("TenantDays while the operations are held: %v after %s", err, took)
	}
	if len(days) != 2 || days[1].Tenant.Name != "shop" || days[1].Tenant.LLMBudgetMicros != 5000 {
		t.Fatalf("TenantDays = %+v, want bank and shop with shop's budget", days)
	}
	for _, d := range days {
		if d.Read != ops.SpendNotRead {
			t.Errorf("%s: read %d, want %d (not read)", d.Tenant.Name, d.Read, ops.SpendNotRead)
		}
	}
	if took > 20*time.Second {
		t.Errorf("TenantDays answered after %s, with a bound of 200ms", took)
	}
}
