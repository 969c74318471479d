package pg

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
)

// tenantDaysQuery is TenantDays' statement: $1 the day's start, $2 the currency, $3 the most
// calls of one tenant summed. Each tenant's spend sums the budget check's calls
// (llmSpendCalls), read on operations_tenant_llm_spend_idx for each tenant in turn, so a page
// of many tenants costs one statement, not one a tenant; a tenant with more than $3 calls
// that day has the first $3 + 1 summed, a floor of its spend, so that one busy tenant
// neither holds the page nor hides the other tenants' figures.
var tenantDaysQuery = `
SELECT ` + accountTenantCols + `, a.min_mode, a.min_cents, a.not_executed, s.spent, s.calls > $3
FROM tenants t LEFT JOIN tenant_approvals a ON a.tenant_id = t.id
CROSS JOIN LATERAL (
	SELECT coalesce(sum(c.cost_micros), 0)::bigint AS spent, count(*) AS calls
	FROM (SELECT o.cost_micros ` + llmSpendCalls("$1", "$2") + ` LIMIT $3::int + 1) c) s
ORDER BY t.name`

// tenantsUnreadQuery is TenantDays' statement once the spends could not be read in time: the
// tenants and their settings alone, which read no operation.
var tenantsUnreadQuery = `
SELECT ` + accountTenantCols + `, a.min_mode, a.min_cents, a.not_executed, 0::bigint, false
FROM tenants t LEFT JOIN tenant_approvals a ON a.tenant_id = t.id
ORDER BY t.name`

// TenantDays lists every tenant by name with its own approval settings and what its LLM
// operations opened on the UTC day that starts at day cost in currency: the figure LLMSpend
// reads for its budget check, summed here for tenants without a budget too, so that a person
// choosing one sees what the tenant spends. The read keeps within bound (zero fields take
// ops.DefaultSpendBound's): a tenant with more calls than bound.Calls that day has a floor of
// its spend (ops.SpendAtLeast), and when the statement outlasts bound.Time the tenants come
// without any spend (ops.SpendNotRead) rather than the page waiting on the sums.
func (db *DB) TenantDays(ctx context.Context, day time.Time, currency string, bound ops.SpendBound) ([]ops.TenantDay, error) {
	bound = bound.OrDefault()
	var days []ops.TenantDay
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		// Local to the transaction, so the pooled connection (or a pooler's) keeps its own.
		ms := strconv.FormatInt(max(bound.Time.Milliseconds(), 1), 10)
		if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`, ms); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, tenantDaysQuery, day.UTC().Truncate(24*time.Hour), currency, bound.Calls)
		if err != nil {
			return err
		}
		days, err = pgx.CollectRows(rows, scanTenantDay(ops.SpendWhole))
		return err
	})
	// 57014 (query_canceled) is the statement timeout's, unless the caller itself went away.
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "57014" && ctx.Err() == nil {
		rows, qerr := db.Pool.Query(ctx, tenantsUnreadQuery)
		if qerr == nil {
			days, qerr = pgx.CollectRows(rows, scanTenantDay(ops.SpendNotRead))
		}
		err = qerr
	}
	if err != nil {
		return nil, interpret(err, "list the tenants' LLM spend")
	}
	return days, nil
}

// scanTenantDay reads a row of TenantDays' statements, whose spend is read as read says unless
// the row says the read stopped at its bound of calls.
func scanTenantDay(read ops.SpendRead) pgx.RowToFunc[ops.TenantDay] {
	return func(r pgx.CollectableRow) (ops.TenantDay, error) {
		d := ops.TenantDay{Read: read}
		t := &ops.Tenant{}
		var mode *string
		var capped bool
		a := ops.TenantApprovals{}
		if err := r.Scan(&t.ID, &t.Name, &t.RequireIdempotencyKey, &t.StripeAccount, &t.LLMBudgetMicros, &t.CreatedAt,
			&mode, &a.MinCents, &a.NotExecuted, &d.Spent, &capped); err != nil {
			return d, err
		}
		if capped {
			d.Read = ops.SpendAtLeast
		}
		d.Tenant = t
		if mode != nil {
			a.TenantID, a.MinOff = t.ID, *mode == "off"
			d.Approvals = &a
		}
		return d, nil
	}
}
