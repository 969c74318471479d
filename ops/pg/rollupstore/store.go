// Package rollupstore holds the statements of the reconciliation table's numbers: the
// counts of the raw rows (client requests, operations, attempts, provider charges) behind
// every number, the drill-down to the rows behind one number, and the per-minute rollups of
// those counts with their quarter hours, hours and backlog snapshots (the tables rollups,
// rollup_money, rollup_state and backlog_snapshots) that the reconciliation and insights
// pages read. It implements recon.MetricsStore, recon.RollupStore and recon.BacklogStore on
// the pool of ops/pg.
package rollupstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

var (
	_ recon.MetricsStore = (*Store)(nil)
	_ recon.RollupStore  = (*Store)(nil)
	_ recon.BacklogStore = (*Store)(nil)
)

// Store is the rollups' and counts' store on db's pool.
type Store struct {
	db *pg.DB
	// pause is the rest between two minutes of raw rows counted (Paced).
	pause time.Duration
}

// New returns the rollups' and counts' store on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// retentionHorizon is the first whole hour the retention has removed nothing before: the
// rollup job recomputes no hour before it, since its raw rows may be gone, and its rollups
// stay as they were computed. Zero when nothing was ever removed.
func retentionHorizon(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var before *time.Time
	err := tx.QueryRow(ctx, `SELECT removed_before FROM retention_state WHERE name = $1`, pg.RetentionStateName).Scan(&before)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && before == nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, pg.Interpret(err, "read the retention horizon")
	}
	h := before.UTC().Truncate(time.Hour)
	if h.Before(*before) {
		h = h.Add(time.Hour)
	}
	return h, nil
}
