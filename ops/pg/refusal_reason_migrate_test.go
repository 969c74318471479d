package pg_test

import (
	"context"
	"testing"
	"time"
)

// TestRefusalReasonMigrationKeepsTheRefusalsWriteAsCheap: ops rule 8 records every refused
// request; migration 00088 records why too, so that the built-in rules can tell a tenant
// stopped by its LLM budget from a malformed request. The reason is a column of the row the
// refusal already writes, with no index of its own (the counts read refused requests by
// their time, as before), and the rollups gain a count of the budget's refusals. Rows
// recorded before it keep no reason and rollups no such refusal; its down migration takes
// both columns away and keeps the rows.
func TestRefusalReasonMigrationKeepsTheRefusalsWriteAsCheap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := f.db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	columns := func() int {
		t.Helper()
		return f.count(t, `SELECT count(*) FROM information_schema.columns
WHERE (table_name, column_name) IN (('client_requests', 'reason'), ('rollups', 'refused_budget'))`)
	}
	indexes := func() int {
		t.Helper()
		return f.count(t, `SELECT count(*) FROM pg_indexes WHERE tablename = 'client_requests'`)
	}
	if err := f.db.MigrateDownTo(ctx, 87); err != nil {
		t.Fatal(err)
	}
	if n := columns(); n != 0 {
		t.Fatalf("before migration 00088: %d of its columns, want none", n)
	}
	before := indexes()
	at := t0.Add(-time.Hour)
	exec(`INSERT INTO client_requests (tenant_id, kind, request_ref, duplicate, answer, received_at, answered_at)
VALUES ($1, 'llm_call', 'old-refusal', false, 'rejected', $2, $2)`, f.tenant, at)
	exec(`INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, api, client_requests, answered_rejected, computed_at)
VALUES (60, $1, $2, 'llm_call', '', '', 1, 1, now())`, at.Truncate(time.Minute), f.tenant)
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := columns(); n != 2 {
		t.Fatalf("after migration 00088: %d of its 2 columns", n)
	}
	if n := indexes(); n != before {
		t.Errorf("client_requests has %d indexes after migration 00088, want the %d it had", n, before)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'old-refusal' AND reason IS NULL`); n != 1 {
		t.Errorf("%d refusals recorded before the migration without a reason, want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM rollups WHERE tenant_id = $1 AND answered_rejected = 1 AND refused_budget = 0`, f.tenant); n != 1 {
		t.Errorf("%d rollup rows of before the migration with no budget refusal, want 1", n)
	}
	if err := f.db.MigrateDownTo(ctx, 87); err != nil {
		t.Fatal(err)
	}
	if n := columns(); n != 0 {
		t.Errorf("after migration 00088's down: %d of its columns, want none", n)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'old-refusal'`); n != 1 {
		t.Errorf("migration 00088's down kept %d of the refused request's rows, want 1", n)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
