package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg"
)

// TestLLMSpendCountsTheTenantsLLMCostOfTheDayInItsCurrency: the spend a tenant's budget caps
// (ops rule 8 records each call it refuses) is what the tenant's own LLM operations opened
// since the day began cost, calls and job generations alike, in the price table's currency:
// not another tenant's, not a refund's amount, not yesterday's, not a cost in another
// currency (amounts of two currencies never add). A tenant without a budget sums nothing.
func TestLLMSpendCountsTheTenantsLLMCostOfTheDayInItsCurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSpendDay(t)
	db, day, shop, bank := f.db, f.day, f.shop, f.bank
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
	text := planOf(t, pg.LLMSpendQuery, int64(1), time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), "usd")
	if !strings.Contains(text, "operations_tenant_llm_spend_idx") {
		t.Errorf("the spend is not read on its index:\n%s", text)
	}
}
