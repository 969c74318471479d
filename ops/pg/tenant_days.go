package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// tenantDaysQuery is TenantDays' statement: $1 the day's start, $2 the currency. Each
// tenant's spend is the budget check's sum (llmSpendSum), read on
// operations_tenant_llm_spend_idx for each tenant in turn, so a page of many tenants costs
// one statement, not one a tenant.
var tenantDaysQuery = `
SELECT ` + accountTenantCols + `, a.min_mode, a.min_cents, a.not_executed, ` + llmSpendSum("$1", "$2") + `
FROM tenants t LEFT JOIN tenant_approvals a ON a.tenant_id = t.id
ORDER BY t.name`

// TenantDays lists every tenant by name with its own approval settings and what its LLM
// operations opened on the UTC day that starts at day cost in currency: the figure LLMSpend
// reads for its budget check, summed here for tenants without a budget too, so that a person
// choosing one sees what the tenant spends.
func (db *DB) TenantDays(ctx context.Context, day time.Time, currency string) ([]ops.TenantDay, error) {
	rows, err := db.Pool.Query(ctx, tenantDaysQuery, day.UTC().Truncate(24*time.Hour), currency)
	if err != nil {
		return nil, interpret(err, "list the tenants' LLM spend")
	}
	days, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ops.TenantDay, error) {
		var d ops.TenantDay
		t := &ops.Tenant{}
		var mode *string
		a := ops.TenantApprovals{}
		if err := r.Scan(&t.ID, &t.Name, &t.RequireIdempotencyKey, &t.StripeAccount, &t.LLMBudgetMicros, &t.CreatedAt,
			&mode, &a.MinCents, &a.NotExecuted, &d.Spent); err != nil {
			return d, err
		}
		d.Tenant = t
		if mode != nil {
			a.TenantID, a.MinOff = t.ID, *mode == "off"
			d.Approvals = &a
		}
		return d, nil
	})
	if err != nil {
		return nil, interpret(err, "list the tenants' LLM spend")
	}
	return days, nil
}
