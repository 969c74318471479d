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

// RetentionTables lists the table each step of a retention batch deletes from, in the order
// the batch runs them: the steps of the batch's operations, then those of the rows of no
// operation.
func RetentionTables() []string {
	var out []string
	for _, s := range retentionSteps {
		out = append(out, s.table)
	}
	for _, s := range orphanSteps {
		out = append(out, s.table)
	}
	return out
}
