package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// RetentionStateName is the retention's row of retention_state: ops/pg/retainstore writes
// how far the retention removed, and the rollups (ops/pg/rollupstore) read it there.
const RetentionStateName = "retention"

// RetentionRemovedBefore is the latest cutoff the retention removed closed operations at,
// whatever SETTLE_RETENTION the replica that removed them ran with: an operation closed
// before it may be gone. Zero when nothing was ever removed.
func (db *DB) RetentionRemovedBefore(ctx context.Context) (time.Time, error) {
	var before *time.Time
	err := db.Pool.QueryRow(ctx, `SELECT removed_before FROM retention_state WHERE name = $1`, RetentionStateName).Scan(&before)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && before == nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, Interpret(err, "read how far the retention removed")
	}
	return *before, nil
}
