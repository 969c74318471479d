package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// RetentionStateName is the retention's row of retention_state: ops/pg/retainstore writes
// how far the retention removed, and the rollups read it here.
const RetentionStateName = "retention"

// retentionHorizon is the first whole hour the retention has removed nothing before: the
// rollup job recomputes no hour before it, since its raw rows may be gone, and its rollups
// stay as they were computed. Zero when nothing was ever removed.
func retentionHorizon(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var before *time.Time
	err := tx.QueryRow(ctx, `SELECT removed_before FROM retention_state WHERE name = $1`, RetentionStateName).Scan(&before)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && before == nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, interpret(err, "read the retention horizon")
	}
	h := before.UTC().Truncate(time.Hour)
	if h.Before(*before) {
		h = h.Add(time.Hour)
	}
	return h, nil
}
