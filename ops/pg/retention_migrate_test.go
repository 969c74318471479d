package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestPartitionMigrationKeepsRows: rows written before migration 00031 are all there after
// it, with their ids, each in the partition of its month; the ids go on after the largest;
// and the migration rolls back to plain tables with the rows too.
func TestPartitionMigrationKeepsRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 30); err != nil {
		t.Fatal(err)
	}
	relkind := func(table string) string {
		var k string
		if err := f.db.Pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = $1`, table).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := relkind("attempts"); k != "r" {
		t.Fatalf("attempts at version 30: relkind %q, want a plain table", k)
	}
	may, dec := time.Date(2025, 5, 20, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	closed := dec.Add(time.Hour)
	a := pgtest.SeedHistory(t, f.db, f.tenant, ops.StatusUnknown, ops.KindRefund, may, nil)
	b := pgtest.SeedHistory(t, f.db, f.tenant, ops.StatusSucceeded, ops.KindRefund, dec, &closed)
	dump := func() string {
		var s string
		if err := f.db.Pool.QueryRow(ctx, `SELECT (SELECT string_agg(format('%s %s %s %s', id, operation_id, received_at, request_ref), ',' ORDER BY id) FROM client_requests)
			|| (SELECT string_agg(format('%s %s %s %s', id, operation_id, n, started_at), ',' ORDER BY id) FROM attempts)
			|| (SELECT string_agg(format('%s %s %s %s %s', id, at, action, entity_id, evidence_id), ',' ORDER BY id) FROM audit_log)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := dump()

	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"client_requests", "attempts", "audit_log"} {
		if k := relkind(table); k != "p" {
			t.Errorf("%s after migrate: relkind %q, want partitioned", table, k)
		}
	}
	if after := dump(); after != before {
		t.Fatalf("rows changed by the migration:\nbefore %s\nafter  %s", before, after)
	}
	for id, month := range map[string]string{a: "2025_05", b: "2025_12"} {
		if got := pgtest.PartitionOf(t, f.db, "attempts", "operation_id = $1", id); got != "attempts_"+month {
			t.Errorf("attempt of %s in %s, want attempts_%s", id, got, month)
		}
		if got := pgtest.PartitionOf(t, f.db, "client_requests", "operation_id = $1", id); got != "client_requests_"+month {
			t.Errorf("client requests of %s in %s, want client_requests_%s", id, got, month)
		}
	}
	var maxID, newID int64
	if err := f.db.Pool.QueryRow(ctx, `SELECT max(id) FROM audit_log`).Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES (now(), 'w', 'x', 'y', 'z') RETURNING id`).Scan(&newID); err != nil || newID <= maxID {
		t.Fatalf("new audit id %d after %d: %v", newID, maxID, err)
	}
	if _, err := f.db.Pool.Exec(ctx, `DELETE FROM audit_log WHERE id = $1`, newID); err != nil {
		t.Fatal(err)
	}

	if err := f.db.MigrateDownTo(ctx, 30); err != nil {
		t.Fatal(err)
	}
	if k := relkind("audit_log"); k != "r" {
		t.Errorf("audit_log rolled back: relkind %q, want a plain table", k)
	}
	if after := dump(); after != before {
		t.Fatalf("rows changed by the rollback:\nbefore %s\nafter  %s", before, after)
	}
}
