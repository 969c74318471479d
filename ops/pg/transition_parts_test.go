package pg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// A close on the provider's direct answer is one statement that names only the tables it
// writes: the server sets up every table a statement names, with its indexes and
// constraints, on each execution, even one it writes no row to. It writes no evidence row
// (the attempt's answer is the evidence), no audit row (the attempt's finish is its own
// audit entry) and answers no client request here, so none of those tables is in it; the
// rows it does write are all there (ops rules 6 and 9).
func TestDirectAnswerCloseNamesOnlyTheTablesItWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("parts", 1200), "req-parts", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK,
		Result: &ops.Result{ProviderRef: "re_parts"}})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("close: %v", err)
	}
	w := pg.LedgerWrites(f.db)
	if w == nil {
		t.Fatal("no pool of its own for the ledger's writes on a direct connection")
	}
	var closes []string
	for _, c := range w.AcquireAllIdle(ctx) {
		rows, err := c.Query(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%UPDATE operations o SET status = $1, phase = $2, version = version + 1,%' AND statement NOT LIKE '%pg_prepared_statements%'`)
		if err != nil {
			c.Release()
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			closes = append(closes, s)
		}
		rows.Close()
		c.Release()
	}
	if len(closes) == 0 {
		t.Fatal("the close was not prepared on the ledger's write pool")
	}
	for _, sql := range closes {
		for _, table := range []string{"INSERT INTO evidence", "UPDATE client_requests", "INSERT INTO audit_log"} {
			if strings.Contains(sql, table) {
				t.Errorf("the close of a direct answer names %q, which it writes nothing to", table)
			}
		}
		for _, table := range []string{"UPDATE attempts", "audit_id = nextval(", "INSERT INTO provider_charges", "UPDATE close_proposals", "INSERT INTO outbox"} {
			if !strings.Contains(sql, table) {
				t.Errorf("the close of a direct answer lacks %q", table)
			}
		}
	}
	if n := f.count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = 're_parts'`); n != 1 {
		t.Errorf("%d charges recorded, want 1 (ops rule 3)", n)
	}
	if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND audit_id IS NOT NULL AND op_status = 'succeeded'`, op.ID); n != 1 {
		t.Errorf("%d attempts hold the close's audit entry, want 1 (ops rule 6)", n)
	}
}
