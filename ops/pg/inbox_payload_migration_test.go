package pg_test

import (
	"context"
	"testing"
)

// The inbox rows a receiver recorded before ApplyOnce stopped keeping event bodies lose
// theirs at the migration, so a job result copied there before the upgrade does not outlive
// the body purge either; each row keeps the event id that applies it once (ops rule 10).
func TestInboxMigrationDropsTheEventBodiesKeptBefore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 65); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO consumed_events (consumer, event_id, topic, entity_id, payload, applied_at)
		VALUES ('sample', 'ev-1', 'job.published', 'job-1', '{"result":{"summary":"secret"}}', now())`); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM consumed_events WHERE consumer = 'sample' AND event_id = 'ev-1' AND payload IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatal("the inbox row lost its event id, or kept the event's body")
	}
}
