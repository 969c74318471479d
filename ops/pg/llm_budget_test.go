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

// TestLLMSpendCountsTheTenantsLLMCostOfTheDayInItsCurrency: the spend a tenant's budget caps
// (ops rule 8 records each call it refuses) is what the tenant's own LLM operations opened
// since the day began cost, calls and job generations alike, in the price table's currency:
// not another tenant's, not a refund's amount, not yesterday's, not a cost in another
// currency (amounts of two currencies never add). A tenant without a budget sums nothing.
func TestLLMSpendCountsTheTenantsLLMCostOfTheDayInItsCurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var shop, bank int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name, llm_budget_micros) VALUES ('shop', 5000) RETURNING id`).Scan(&shop); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('bank') RETURNING id`).Scan(&bank); err != nil {
		t.Fatal(err)
	}
	for i, o := range []struct {
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
VALUES ($1, $2, $3, 'fakellm', $4, $8, 'fp', 0, '', $5, $6::jsonb, 'succeeded', $7, $7, $7)`,
			id, o.tenant, o.kind, "intent-"+string(rune('a'+i)), o.cost, o.usage, o.at, id); err != nil {
			t.Fatal(err)
		}
	}
	if budget, spent, err := db.LLMSpend(ctx, shop, day, "usd"); err != nil || budget != 5000 || spent != 120 {
		t.Errorf("shop's spend: budget %d, spent %d, %v; want 5000 and 120", budget, spent, err)
	}
	if budget, spent, err := db.LLMSpend(ctx, shop, day, "eur"); err != nil || budget != 5000 || spent != 4000 {
		t.Errorf("shop's spend in euros: budget %d, spent %d, %v; want 5000 and 4000", budget, spent, err)
	}
	if budget, spent, err := db.LLMSpend(ctx, bank, day, "usd"); err != nil || budget != 0 || spent != 0 {
		t.Errorf("bank without a budget: budget %d, spent %d, %v; want nothing", budget, spent, err)
	}
}

// TestLLMSpendIsReadOnItsIndex: the spend of a budgeted tenant's day is read every few
// seconds (ops rule 8 records each call it refuses), so it must be read on
// operations_tenant_llm_spend_idx, whose expression and condition the statement repeats,
// not by walking the tenant's or everyone's operations.
func TestLLMSpendIsReadOnItsIndex(t *testing.T) {
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
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	rows, err := conn.Query(ctx, `EXPLAIN `+pg.LLMSpendQuery, int64(1), day, "usd")
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
		t.Errorf("the spend is not read on its index:\n%s", text)
	}
}
