package reconstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestFailedAfterSuccessIsTheReconcilersException: the exception the ledger's store raises
// when a refund it saw succeed fails at the provider, written without ops/recon's types,
// reads in the exception queue as ops/recon's failed-after-success exception, open, at
// that kind's default severity, with its audit row. It is one row with the reconciler's
// findings: the reconciler seeing the same refund notes another sighting of it, and a
// person's resolution is reopened when the provider shows another record for it, as any
// finding's is.
func TestFailedAfterSuccessIsTheReconcilersException(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	store := reconstore.New(db)
	var tenant int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe"}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	status, amount_cents, currency, created_at, updated_at, closed_at) VALUES ($1::uuid, $2, 'refund', 'stripe', $1::text, $1::text,
	'fp', 'failed', 4200, 'usd', $3, $3, $3)`, op.ID, tenant, t0); err != nil {
		t.Fatal(err)
	}
	failed := ops.ProviderRecord{Provider: "stripe", Ref: "re_1", OperationID: op.ID, AmountCents: 4200, Currency: "usd",
		Status: "failed", Raw: json.RawMessage(`{"id":"re_1","status":"failed"}`)}
	for range 2 { // the provider sends its event again
		if err := db.RecordFailedAfterSuccess(ctx, op, failed, t0); err != nil {
			t.Fatal(err)
		}
	}
	list, err := store.ListExceptions(ctx, recon.ExceptionFilter{Kind: recon.ExceptionFailedAfterSuccess})
	if err != nil || len(list) != 1 {
		t.Fatalf("failed-after-success exceptions: %d (%v), want 1", len(list), err)
	}
	ex := list[0]
	if ex.Status != recon.ExceptionOpen || ex.Severity != recon.DefaultSeverity(recon.ExceptionFailedAfterSuccess) ||
		ex.Provider != "stripe" || ex.Ref != op.ID || ex.OperationID != op.ID || ex.TenantID != tenant ||
		!slices.Equal(ex.ChargeRefs, []string{"re_1"}) || ex.AmountCents != 4200 || ex.Currency != "usd" || ex.SeenCount != 2 ||
		ex.Summary == "" || len(ex.Details) == 0 {
		t.Fatalf("the ledger's exception reads as %+v", ex)
	}
	audit, err := store.Audit(ctx, "recon_exception", strconv.FormatInt(ex.ID, 10))
	if err != nil || len(audit) != 1 || audit[0].Action != "open" || audit[0].Actor != "ledger" {
		t.Fatalf("audit %+v (%v), want the ledger's open", audit, err)
	}
	var after map[string]any
	if err := json.Unmarshal(audit[0].After, &after); err != nil || after["status"] != "open" || after["severity"] != "high" {
		t.Fatalf("audited state %s (%v)", audit[0].After, err)
	}

	// The reconciler finds the same refund: the same exception, seen once more.
	again, created, err := store.RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionFailedAfterSuccess, Provider: "stripe",
		Ref: op.ID, TenantID: tenant, OperationID: op.ID, ChargeRefs: []string{"re_1"}, AmountCents: 4200, Currency: "usd",
		Summary: "seen by the reconciler", Actor: "stripe reconciliation", At: t0.Add(time.Hour)})
	if err != nil || created || again.ID != ex.ID || again.SeenCount != 3 || again.Version != ex.Version {
		t.Fatalf("the reconciler's sighting: %+v created %v (%v), want the ledger's exception seen again", again, created, err)
	}

	// Resolved by a person, it opens again when the provider shows another record of it.
	resolved, err := recon.ChangeException(ctx, store, recon.ExceptionChange{ID: ex.ID, Version: again.Version,
		Action: recon.ActionResolve, Note: "The customer was refunded by hand.", Actor: "oncall@example.com", At: t0.Add(2 * time.Hour)})
	if err != nil || resolved.Status != recon.ExceptionResolved {
		t.Fatalf("resolve: %+v (%v)", resolved, err)
	}
	failed.Ref = "re_2"
	if err := db.RecordFailedAfterSuccess(ctx, op, failed, t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	reopened, err := store.GetException(ctx, ex.ID)
	if err != nil || reopened.Status != recon.ExceptionOpen || reopened.Version != resolved.Version+1 ||
		!slices.Equal(reopened.ChargeRefs, []string{"re_1", "re_2"}) {
		t.Fatalf("after another failed record: %+v (%v), want it open again with both records", reopened, err)
	}
	if audit, err := store.Audit(ctx, "recon_exception", strconv.FormatInt(ex.ID, 10)); err != nil || len(audit) != 3 || audit[2].Action != "reopen" {
		t.Fatalf("audit %+v (%v), want open, resolve, reopen", audit, err)
	}
}
