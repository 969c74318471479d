package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// llmSpendSum is the spend of tenant t (the statement's tenants row) that both reads of a
// spend sum, so that the dashboard shows the figure the budget check reads: day and currency
// are the placeholders of the day's start and of the currency.
func llmSpendSum(day, currency string) string {
	return `coalesce((SELECT sum(o.cost_micros) ` + llmSpendCalls(day, currency) + `), 0)::bigint`
}

// llmSpendCalls is the FROM and WHERE of the calls whose costs make tenant t's spend, which
// every read of a spend sums (llmSpendSum, TenantDays' bounded sum).
func llmSpendCalls(day, currency string) string {
	return `FROM operations o
		WHERE o.tenant_id = t.id AND o.kind IN ('llm_call', 'llm_job')
			AND date_bin('1 day', o.created_at, '2000-01-01 00:00:00+00') = ` + day + `::timestamptz
			AND coalesce(o.usage->>'currency', 'usd') = ` + currency
}

// llmSpendQuery is LLMSpend's statement: $1 the tenant, $2 the day's start, $3 the currency.
var llmSpendQuery = `
SELECT coalesce(t.llm_budget_micros, 0),
	CASE WHEN t.llm_budget_micros IS NULL THEN 0 ELSE ` + llmSpendSum("$2", "$3") + ` END
FROM tenants t WHERE t.id = $1`

// LLMSpend returns the tenant's LLM budget per day (0: none) and what its LLM operations
// opened on the UTC day that starts at day cost in currency, in micro-units, in one
// statement, read on operations_tenant_llm_spend_idx (migration 00087), whose expression
// the statement repeats (its equality proves the index's condition). A cost is in the
// currency its usage record names, dollars where it names none (llm.CostCurrency); a cost
// in another currency is not counted, since amounts of two currencies never add up. A
// tenant without a budget sums nothing: the gateway asks only for tenants with one, and the
// job workers learn from the answer that a tenant has none.
func (db *DB) LLMSpend(ctx context.Context, tenantID int64, day time.Time, currency string) (budget, spent int64, err error) {
	err = db.Pool.QueryRow(ctx, llmSpendQuery, tenantID, day.UTC().Truncate(24*time.Hour), currency).Scan(&budget, &spent)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ops.Errorf(ops.ENOTFOUND, "No tenant with id %d.", tenantID)
	} else if err != nil {
		return 0, 0, interpret(err, "read the tenant's LLM spend")
	}
	return budget, spent, nil
}

// SetLLMBudget sets the LLM budget per UTC day of the tenant named name in micro-units (0
// clears it), with an audit row naming actor; setting what it has already changes and audits
// nothing.
func (db *DB) SetLLMBudget(ctx context.Context, name string, micros int64, actor string, now time.Time) (ops.BudgetChange, error) {
	if err := checkTenantName(name); err != nil {
		return ops.BudgetChange{}, err
	}
	return db.setLLMBudget(ctx, func(tx pgx.Tx) (*ops.Tenant, error) { return lockTenantNamed(ctx, tx, name) }, micros, actor, now)
}

// SetTenantLLMBudget is SetLLMBudget of the tenant with id tenantID, as the dashboard names
// it: an id of no tenant (a forged one, or a tenant removed since the page was shown) is
// ENOTFOUND and changes nothing.
func (db *DB) SetTenantLLMBudget(ctx context.Context, tenantID int64, micros int64, actor string, now time.Time) (ops.BudgetChange, error) {
	return db.setLLMBudget(ctx, func(tx pgx.Tx) (*ops.Tenant, error) {
		t, err := scanAccountTenant(tx.QueryRow(ctx, `SELECT `+accountTenantCols+` FROM tenants t WHERE t.id = $1 FOR UPDATE`, tenantID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ops.Errorf(ops.ENOTFOUND, "There is no tenant with id %d; it may have been removed since the page was shown.", tenantID)
		} else if err != nil {
			return nil, interpret(err, "find tenant")
		}
		return t, nil
	}, micros, actor, now)
}

// setLLMBudget sets the budget of the tenant that lock reads and locks, and audits the change,
// in one transaction.
func (db *DB) setLLMBudget(ctx context.Context, lock func(pgx.Tx) (*ops.Tenant, error), micros int64, actor string, now time.Time) (ops.BudgetChange, error) {
	if micros < 0 {
		return ops.BudgetChange{}, ops.Errorf(ops.EINVALID, "An LLM budget is more than zero, or none.")
	}
	var c ops.BudgetChange
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		t, err := lock(tx)
		if err != nil {
			return err
		}
		c = ops.BudgetChange{Tenant: t, Before: t.LLMBudgetMicros}
		if t.LLMBudgetMicros == micros {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE tenants SET llm_budget_micros = nullif($2::bigint, 0) WHERE id = $1`, t.ID, micros); err != nil {
			return interpret(err, "set the LLM budget")
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after)
VALUES ($1, $2, 'tenant.llm_budget', 'tenant', $3::bigint::text,
	jsonb_build_object('tenant', $4::text, 'llm_budget_micros', nullif($5::bigint, 0)),
	jsonb_build_object('tenant', $4::text, 'llm_budget_micros', nullif($6::bigint, 0)))`,
			now, actor, t.ID, t.Name, t.LLMBudgetMicros, micros)
		if err != nil {
			return fmt.Errorf("audit the LLM budget: %w", interpret(err, "audit"))
		}
		t.LLMBudgetMicros, c.Changed = micros, true
		return nil
	})
	return c, err
}

// lockTenantNamed reads the tenant named name and locks its row for the change the caller's
// transaction makes to its settings.
func lockTenantNamed(ctx context.Context, tx pgx.Tx, name string) (*ops.Tenant, error) {
	t, err := scanAccountTenant(tx.QueryRow(ctx, `SELECT `+accountTenantCols+` FROM tenants t WHERE t.name = $1 FOR UPDATE`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No tenant %s; tenants are made by 'settle token add --tenant %s'.", name, name)
	} else if err != nil {
		return nil, interpret(err, "find tenant")
	}
	return t, nil
}
