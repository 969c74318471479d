package pg

import (
	"github.com/jackc/pgx/v5/pgxpool"
)

// LedgerWrites is the pool of db's group-committed ledger statements, nil when they share
// db.Pool.
func LedgerWrites(db *DB) *pgxpool.Pool { return db.writes }
