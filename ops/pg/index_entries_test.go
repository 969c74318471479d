package pg_test

import (
	"context"
	"slices"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestASuccessChargeLandsOnlyInTheIndexesItsReadersUse: each index a row lands in costs the
// write path an index entry, its WAL and its page splits on every success. The provider
// charge a success records is read by its key (ops rule 3: one operation, one charge), by
// its operation (double charges, timelines, retention), by when Settle saw it (rollups,
// tallies) and, for an orphan only, by when it was charged: no reader asks for the charges
// of one provider by time (migration 00067 dropped that index), so a success writes no
// entry for it. Nor does any reader address a charge by its id: the retention deletes old
// orphans through the orphans' index (migration 00077 dropped the primary key).
func TestASuccessChargeLandsOnlyInTheIndexesItsReadersUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("idx", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	ok := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_1",
			Result: &ops.Result{ProviderRef: "re_idx", Body: []byte(`{"id":"re_idx"}`)}}
	})
	if _, err := f.ledger.Run(ctx, o.Op, ok, ops.RunSpec{Owner: "w", First: o.Attempt}); err != nil {
		t.Fatal(err)
	}
	got := f.indexesHolding(t, "provider_charges", "charge_ref = 're_idx'")
	want := []string{"provider_charges_operation_idx", "provider_charges_pkey", "provider_charges_seen_idx"}
	if !slices.Equal(got, want) {
		t.Fatalf("a success's charge lands in %v, want %v", got, want)
	}
}

// indexesHolding returns, sorted, the indexes of table whose predicate the one row that
// where selects satisfies: the indexes a write of that row adds an entry to.
func (f *fixture) indexesHolding(t *testing.T, table, where string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := f.db.Pool.Query(ctx, `SELECT c.relname, coalesce(pg_get_expr(i.indpred, i.indrelid), 'true')
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass ORDER BY c.relname`, table)
	if err != nil {
		t.Fatal(err)
	}
	type index struct{ name, pred string }
	var all []index
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.pred); err != nil {
			t.Fatal(err)
		}
		all = append(all, ix)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ix := range all {
		if f.count(t, `SELECT count(*) FROM `+table+` WHERE `+where+` AND (`+ix.pred+`)`) == 1 {
			out = append(out, ix.name)
		}
	}
	return out
}
