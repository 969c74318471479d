package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// hotTables are the tables every lifecycle writes a row of (or, for the partitioned ones,
// each of their partitions): autovacuum visits them about once a minute while the ledger is
// young.
var hotTables = []string{"operations", "provider_charges", "evidence", "outbox"}

// hotPartitioned are the partitioned tables every lifecycle writes: their storage parameters
// live on each partition.
var hotPartitioned = []string{"attempts", "client_requests", "audit_log"}

// TestAutovacuumOfTheHotTablesIsPaced: every table a lifecycle writes, every partition of the
// partitioned ones, and a month created after the migration, sleep at least 10 ms between
// two slices of autovacuum's page work, so that a visit to them under load takes seconds of
// small slices rather than one burst of CPU the gateway's calls wait behind. Without the
// storage parameter a worker runs with the server's 2 ms.
func TestAutovacuumOfTheHotTablesIsPaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	// A month the retention creates ahead, long after the migration ran.
	later := time.Now().AddDate(0, 7, 0)
	if _, err := db.Pool.Exec(ctx, `SELECT settle_month_partitions($1, $1)`, later); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `
SELECT c.oid::regclass::text, coalesce((SELECT substr(o, length('autovacuum_vacuum_cost_delay=') + 1)::real
	FROM unnest(c.reloptions) o WHERE o LIKE 'autovacuum_vacuum_cost_delay=%'), -1)
FROM pg_class c
WHERE c.oid = ANY ($1::regclass[])
	OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = ANY ($2::regclass[]))`, hotTables, hotPartitioned)
	if err != nil {
		t.Fatal(err)
	}
	type table struct {
		Name  string
		Delay float32
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	if err != nil {
		t.Fatal(err)
	}
	month := later.UTC().Format("2006_01")
	want := map[string]bool{}
	for _, n := range hotTables {
		want[n] = true
	}
	for _, n := range hotPartitioned {
		want[n+"_default"], want[n+"_"+month] = true, true
	}
	for _, tb := range tables {
		delete(want, tb.Name)
		if tb.Delay < 10 {
			t.Errorf("%s: autovacuum_vacuum_cost_delay %v, want at least 10 ms (-1: the server's 2 ms)", tb.Name, tb.Delay)
		}
	}
	for n := range want {
		t.Errorf("%s: not found among the hot tables' relations %v", n, tables)
	}
}
