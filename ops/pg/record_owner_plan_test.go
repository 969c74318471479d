package pg_test

import (
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
	plan := pgtest.PlanWithoutSeqScan(t, pgtest.New(t), pg.RecordOwnerSQL,
		pgx.NamedArgs{"provider": "stripe", "ref": "re_1", "except": pg.OperationIDArg(ops.NewOperationID())})
	if !strings.Contains(plan, "operations_tenant_provider_ref_idx") {
		t.Fatalf("the record's owner among the operations is not found on their index:\n%s", plan)
	}
}
