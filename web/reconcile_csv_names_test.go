package web_test

import (
	"context"
	"encoding/csv"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
)

// TestTheExportNamesWhatEachColumnCounts: ops rule 8 makes the table's numbers counts of
// recorded rows, and ops rule 12 lets no answer say more than Settle knows, so the export
// names each column for what it counts, as the page's header does. The page's "Attempts
// sent" leaves out an attempt that never left Settle; an export column named "attempts"
// beside it would pass 2 off as all 3 attempts recorded.
func TestTheExportNamesWhatEachColumnCounts(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	tenant := shopTenant(t, e)
	// The refund's third attempt was refused before it was sent; it is recorded before
	// seedReconFor runs the rollups, so they count it.
	opID := insertRefundOp(t, e, tenant)
	e.exec(t, `INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, outcome) VALUES ($1, 1, 'settle_k2', 'w1', $2, 'not_sent')`,
		opID, t0.Add(-time.Hour))
	seedReconFor(t, e, tenant)
	recs, col := managersExport(t, e)
	if _, ok := col["attempts"]; ok {
		t.Errorf("the export has a column named attempts, which counts only the attempts sent: %v", recs[0])
	}
	i, ok := col["attempts_sent"]
	if !ok {
		t.Fatalf("no attempts_sent column: %v", recs[0])
	}
	var sent int
	for _, rec := range recs[1:] {
		if rec[col["tenant"]] == "shop" && rec[i] == "2" {
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("the shop's rows %v: want 2 attempts sent in one of them", recs)
	}
}

// shopTenant makes the tenant "shop" and returns its id.
func shopTenant(t *testing.T, e *env) int64 {
	t.Helper()
	var tenant int64
	if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	return tenant
}

// managersExport is the last 24 hours' export, hour by hour, as a manager downloads it: its
// records, the header first, and each column's index by its name.
func managersExport(t *testing.T, e *env) ([][]string, map[string]int) {
	t.Helper()
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	r, err := c.Get(e.url + "/reconcile.csv?range=24h&bucket=hour")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	recs, err := csv.NewReader(r.Body).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("csv %v %v", recs, err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	return recs, col
}

// insertRefundOp records a closed refund of tenant an hour before t0 and returns its id.
func insertRefundOp(t *testing.T, e *env, tenant int64) string {
	t.Helper()
	var id string
	at := t0.Add(-time.Hour)
	if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key,
	fingerprint, order_ref, amount_cents, currency, status, created_at, updated_at, closed_at, closed_by)
VALUES (gen_random_uuid(), $1, 'refund', 'stripe', 'k-notsent', 'settle_k2', 'fp', '5000', 900, 'usd', 'failed', $2, $2, $2, 'w1')
RETURNING id::text`, tenant, at).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
