package pg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestRecordOwnerFindsClosesByHandOnTheirIndex: the check a close by hand makes, that no
// other operation of its tenant holds the record it names, reads the operations through
// operations_tenant_provider_ref_idx (migration 00065), tenant first, never by a scan of
// every operation on every close.
func TestRecordOwnerFindsClosesByHandOnTheirIndex(t *testing.T) {
	plan := planWithoutSeqScan(t, pgtest.New(t), pg.RecordOwnerSQL,
		pgx.NamedArgs{"provider": "stripe", "ref": "re_1", "except": pg.OperationIDArg(ops.NewOperationID())})
	if !strings.Contains(plan, "operations_tenant_provider_ref_idx") {
		t.Fatalf("the record's owner among the operations is not found on their index:\n%s", plan)
	}
}

// planWithoutSeqScan is the plan PostgreSQL chooses for query with args when sequential scans
// are priced out, so that a plan test sees whether an index can serve the query at all.
func planWithoutSeqScan(t *testing.T, db *pg.DB, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
