package retainstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// TestRetentionLeavesNoRowNamingARemovedOperation: a lifecycle's client requests, attempts,
// evidence and charges keep no foreign key into operations (migration 00071), so nothing
// but the retention's own steps removes them with their operation. After a pass over
// history of every kind, followed and proposed, no row of any table with an operation_id
// names an operation that is not there, and the operations kept keep their rows.
func TestRetentionLeavesNoRowNamingARemovedOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := retainNow.Add(-500 * 24 * time.Hour)
	oldClose, recentClose := old.Add(time.Hour), retainNow.Add(-24*time.Hour)
	for _, kind := range []ops.Kind{ops.KindRefund, ops.KindLLMCall, ops.KindLLMJob} {
		seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, kind, old, &oldClose)
		seedHistory(t, f.DB, f.Tenant, ops.StatusFailed, kind, old, &oldClose)
		seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, kind, old, &recentClose)
	}
	followedAndProposed(t, f, seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, old, nil), oldClose)
	kept := seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, old, nil)
	before := rowsOf(t, f, kept)

	rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Operations != 7 {
		t.Fatalf("removed %d operations, want 7: %+v", rep.Operations, rep)
	}
	rows, err := f.DB.Pool.Query(ctx, `SELECT a.attrelid::regclass::text FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid
WHERE a.attname = 'operation_id' AND NOT a.attisdropped AND r.relkind IN ('r', 'p') AND NOT r.relispartition
	AND r.relnamespace = 'public'::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 9 {
		t.Fatalf("only %v name an operation", tables)
	}
	for _, table := range tables {
		q := `SELECT count(*) FROM ` + pgx.Identifier{table}.Sanitize() + ` c
WHERE c.operation_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.id = c.operation_id)`
		if n := f.Count(t, q); n != 0 {
			t.Errorf("%d rows of %s name an operation the retention removed", n, table)
		}
	}
	for table, n := range rowsOf(t, f, kept) {
		if n != before[table] {
			t.Errorf("the unknown operation kept %d rows in %s, had %d", n, table, before[table])
		}
	}
}
