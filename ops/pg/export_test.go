package pg

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/ops/recon"
)

// LedgerWrites is the pool of db's group-committed ledger statements, nil when they share
// db.Pool.
func LedgerWrites(db *DB) *pgxpool.Pool { return db.writes }

// RollupReadSettings and RollupCountsSQL are a read of the rollups' planner settings and
// its query of the counts; RollupArgs are that query's arguments for a filter.
const RollupReadSettings = rollupReadSettings

var RollupCountsSQL = rollupCountsSQL

func RollupArgs(f recon.MetricsFilter) pgx.NamedArgs { return rollupArgs(f) }
