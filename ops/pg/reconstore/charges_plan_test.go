package reconstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/reconstore"
)

// TestExceptionChargesAreReadThroughTheirKeys: an exception's charges are those of its
// operation or those it names, read through provider_charges_operation_idx and the
// (provider, charge_ref) key, never by a scan of one provider's charges. Migration 00067
// dropped the index on (provider, charged_at), which only this reader's provider filter
// could have used, so that a success writes one index entry fewer (ops rule 3's charge).
// With sequential scans priced out, as in the other plan tests; an exception of no
// operation reads only the charges it names.
func TestExceptionChargesAreReadThroughTheirKeys(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// A provider's charges as a month of reconciliation leaves them: the planner prices the
	// provider filter by these, not by an empty table.
	for _, sql := range []string{`INSERT INTO provider_charges (provider, charge_ref, amount_cents, currency, status, charged_at, seen_at)
SELECT 'stripe', 're_' || g, 100, 'usd', 'succeeded', now() - g * interval '1 minute', now() FROM generate_series(1, 20000) g`,
		`ANALYZE provider_charges`, `SET LOCAL enable_seqscan = off`} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []string{ops.NewOperationID(), ""} {
		rows, err := tx.Query(ctx, `EXPLAIN `+reconstore.ExceptionChargesSQL,
			pgx.NamedArgs{"provider": "stripe", "op": op, "refs": []string{"re_1"}})
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		want := []string{"provider_charges_pkey"}
		if op != "" {
			want = append(want, "provider_charges_operation_idx")
		}
		for _, want := range want {
			if !strings.Contains(plan, want) {
				t.Errorf("operation %q: the exception's charges are not read through %s:\n%s", op, want, plan)
			}
		}
		if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "charged_idx") {
			t.Errorf("operation %q: the exception's charges are scanned:\n%s", op, plan)
		}
	}
}
