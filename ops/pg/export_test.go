package pg

import (
	"github.com/jackc/pgx/v5"
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

// BatchJob is one statement of a group-commit batch RunBatch sends, with the row its lock
// order is keyed by.
type BatchJob struct {
	SQL  string
	Args []any
	Key  string
}

// RunBatch sends jobs as one group-commit batch, as a leader does, and returns how many
// batches had to be run again one statement at a time so far.
func RunBatch(db *DB, jobs []BatchJob) int64 {
	js := make([]*groupJob, len(jobs))
	for i, j := range jobs {
		js[i] = &groupJob{sql: j.SQL, args: j.Args, key: j.Key, done: make(chan struct{}),
			scan: func(r pgx.Row) error { var k string; return r.Scan(&k) }}
	}
	db.group.exec(js)
	return db.group.rerun.Load()
}
