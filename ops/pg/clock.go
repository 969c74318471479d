package pg

import (
	"context"
	"fmt"
	"time"
)

// ServerNow reads the database server's clock: the time the statement runs, not the start
// of its transaction, so a measurement is not off by a transaction's age (ops.MeasureSkew).
func (db *DB) ServerNow(ctx context.Context) (time.Time, error) {
	var at time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return at.UTC(), nil
}
