package pg

import (
	"context"
	"fmt"
)

// MigrateDownTo rolls the schema back to version, so a test can write rows in an older
// shape and then migrate them up.
func (db *DB) MigrateDownTo(ctx context.Context, version int64) error {
	p, sqldb, err := db.goose(ctx)
	if err != nil {
		return err
	}
	defer sqldb.Close()
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}
