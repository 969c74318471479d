package pg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestChargeMatchingUsesThePrimaryKey: a provider charge is matched to its operation by the
// operations' primary key, never by comparing ids as text (a scan of every operation on
// every webhook, lookup and reconciliation). With sequential scans priced out, the plan of
// the statement must reach operations through its index; and an id that is not a UUID, which
// anyone can write into Stripe metadata, is an orphan, not an error.
func TestChargeMatchingUsesThePrimaryKey(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	plan := pgtest.PlanWithoutSeqScan(t, db, pg.RecordChargeSQL, int64(0), "stripe", "re_1", pg.OperationIDArg(ops.NewOperationID()),
		int64(100), "usd", "succeeded", nil, nil, nil)
	if !strings.Contains(plan, "Index Cond: (id = ") {
		t.Fatalf("charge matching does not use the primary key:\n%s", plan)
	}
	for _, bad := range []string{"not-a-uuid", "' OR 1=1 --", ""} {
		if err := db.RecordCharge(ctx, ops.ProviderRecord{Provider: "stripe", Ref: "re_" + bad, OperationID: bad,
			AmountCents: 1, Currency: "usd", Status: "succeeded"}, 0, ops.SystemClock{}.Now()); err != nil {
			t.Fatalf("operation id %q: %v", bad, err)
		}
	}
}
