package pg

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// LedgerWrites is the pool of db's group-committed ledger statements, nil when they share
// db.Pool.
func LedgerWrites(db *DB) *pgxpool.Pool { return db.writes }

// SetLoneWait sets how long a lone ledger write waits for the group-commit batch at the
// server before it leads one of its own.
func SetLoneWait(db *DB, d time.Duration) { db.group.loneWait = d }

// LLMSpendQuery is LLMSpend's statement, for the test of its plan.
var LLMSpendQuery = llmSpendQuery

// TenantDaysQuery is TenantDays' statement, for the test of its plan.
var TenantDaysQuery = tenantDaysQuery
