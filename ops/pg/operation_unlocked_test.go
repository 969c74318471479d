package pg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/reconstore"
)

// lifecycleTables are the tables a lifecycle's own statements write rows of its operation
// into: its client requests, attempts, evidence and charge.
var lifecycleTables = []string{"attempts", "client_requests", "evidence", "provider_charges"}

// TestALifecycleTakesNoLockOnItsOperationFromItsRows: a row a lifecycle writes into its
// client requests, attempts, evidence or charges fires no foreign-key check onto operations,
// which would re-read the operation the same statement just wrote and lock it (FOR KEY
// SHARE: a lock record per row, on the row every step of the call rewrites). Each of these
// rows is written by the statement that inserts or updates its operation, so it cannot name
// one that does not exist: every client request and attempt is still recorded as its
// operation's (ops rule 8), and a charge counts against its own operation only (ops rule 3).
func TestALifecycleTakesNoLockOnItsOperationFromItsRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rows, err := f.db.Pool.Query(context.Background(), `
SELECT c.conrelid::regclass::text || ' ' || c.conname FROM pg_constraint c
WHERE c.contype = 'f' AND c.conparentid = 0 AND c.confrelid = 'operations'::regclass
	AND c.conrelid::regclass::text = ANY($1)
UNION ALL
SELECT tg.tgrelid::regclass::text || ' trigger ' || tg.tgname FROM pg_trigger tg
WHERE tg.tgisinternal AND tg.tgconstraint <> 0 AND tg.tgrelid::regclass::text = ANY($1)
	AND EXISTS (SELECT 1 FROM pg_constraint c WHERE c.oid = tg.tgconstraint AND c.confrelid = 'operations'::regclass)
ORDER BY 1`, lifecycleTables)
	if err != nil {
		t.Fatal(err)
	}
	checks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) > 0 {
		t.Fatalf("a lifecycle's rows check and lock their operation on every insert: %v", checks)
	}
}

// TestAChargeNamingNoOperationNamesNone: the writers that take an operation id from outside
// the ledger (a provider's metadata, a provider's listing) find the operation in their own
// statement, so a made-up id is recorded as a charge of no operation, and a charge written
// while the retention removes its operation waits for it and names none, instead of naming
// an operation that is gone, where it would never be counted against any (ops rule 3).
func TestAChargeNamingNoOperationNamesNone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	made := ops.NewOperationID()
	if err := f.db.RecordCharge(ctx, ops.ProviderRecord{Provider: "stripe", Ref: "re_madeup", OperationID: made,
		AmountCents: 100, Currency: "usd", Status: "succeeded"}, f.tenant, t0); err != nil {
		t.Fatal(err)
	}
	matched, err := reconstore.New(f.db).RecordMatchedCharges(ctx, "stripe", []ops.ProviderRecord{{Provider: "stripe",
		Ref: "re_madeup2", OperationID: made, AmountCents: 100, Currency: "usd", Status: "succeeded", Created: t0}}, t0)
	if err != nil || len(matched) != 0 {
		t.Fatalf("the listing of a charge of a made-up operation was matched: %v (%v)", matched, err)
	}
	if n := f.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id IS NOT NULL`); n != 0 {
		t.Fatalf("%d charges name an operation that does not exist", n)
	}

	gone := f.lifecycle(t, "removed-meanwhile")
	writers := map[string]func() error{
		"webhook": func() error {
			return f.db.RecordCharge(ctx, ops.ProviderRecord{Provider: "stripe", Ref: "re_late", OperationID: gone.ID,
				AmountCents: 3800, Currency: "usd", Status: "succeeded"}, f.tenant, t0)
		},
		"reconciler": func() error {
			_, err := reconstore.New(f.db).RecordMatchedCharges(ctx, "stripe", []ops.ProviderRecord{{Provider: "stripe",
				Ref: gone.ProviderRef, OperationID: gone.ID, AmountCents: 3800, Currency: "usd", Status: "succeeded", Created: t0}}, t0)
			return err
		},
	}
	removeWhile(t, f, gone.ID, writers)
	if n := f.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1`, gone.ID); n != 0 {
		t.Fatalf("%d charges name the operation the retention removed while they were written", n)
	}
}

// removeWhile deletes operation id and its rows in a transaction, runs each writer while
// that transaction is open, and commits it: a writer that found the operation must have
// waited for the removal, and must not have finished before it.
func removeWhile(t *testing.T, f *fixture, id string, writers map[string]func() error) {
	t.Helper()
	ctx := context.Background()
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, table := range append(slices.Clone(lifecycleTables), "provider_events", "operations") {
		col := "operation_id"
		if table == "operations" {
			col = "id"
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+pgx.Identifier{table}.Sanitize()+` WHERE `+col+` = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, len(writers))
	for _, w := range writers {
		go func() { done <- w() }()
	}
	select {
	case err := <-done:
		t.Fatalf("a writer of a charge did not wait for the removal of its operation (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestALifecycleWriterNamingNoOperationWritesNothing: the statements that write a
// lifecycle's rows write them from the operation they insert or update, so one given an id
// that names no operation (made up, or of an operation the retention removed) writes no
// row, and says the operation is not there: no request or attempt is recorded as an
// operation's that it is not (ops rule 8).
func TestALifecycleWriterNamingNoOperationWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	made := ops.NewOperationID()
	if _, err := f.db.Join(ctx, made, "req-2", t0); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Errorf("a repeat request joined to a made-up operation: %v, want %s", err, ops.ENOTFOUND)
	}
	if _, _, err := f.db.BeginAttempt(ctx, ops.BeginParams{ID: made, Version: 1, Owner: "w1", Now: t0,
		MaxAttempts: 3}); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Errorf("an attempt of a made-up operation: %v, want %s", err, ops.ENOTFOUND)
	}
	for _, to := range []ops.Status{ops.StatusSucceeded, ops.StatusUnknown} {
		_, err := f.db.Transition(ctx, ops.TransitionParams{ID: made, Version: 1, From: ops.StatusInProgress, To: to,
			Now: t0, Actor: "w1", Action: "close", Evidence: &ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "s",
				ProviderRef: "re_madeup", RecordedBy: "w1", RecordedAt: t0},
			Result: &ops.Result{ProviderRef: "re_madeup"}, AnswerRequest: 1, Answer: ops.AnswerNew, AnswerSince: t0})
		if ops.ErrorCode(err) != ops.ENOTFOUND {
			t.Errorf("a close to %s of a made-up operation: %v, want %s", to, err, ops.ENOTFOUND)
		}
	}
	for _, table := range lifecycleTables {
		if n := f.count(t, `SELECT count(*) FROM `+table+` WHERE operation_id = $1`, made); n != 0 {
			t.Errorf("%d rows of %s name the made-up operation", n, table)
		}
	}
}
