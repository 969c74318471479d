package rollupstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// fillCalls inserts n gateway calls created evenly over [from, from+span), each with its
// client request, its attempt and its generation's charge, and nothing else.
func fillCalls(t *testing.T, db *pg.DB, from time.Time, span time.Duration, n int, prefix string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{`
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, request, api, cost_micros, status,
	created_at, updated_at, closed_at)
SELECT gen_random_uuid(), 1, 'llm_call', 'fakellm', $4 || g, $4 || g, 'fp',
	jsonb_build_object('body', repeat('x', 600)), 'chat.completions', 1000 + g, 'succeeded', t, t, t
FROM generate_series(0, $3::int - 1) g, LATERAL (SELECT $1::timestamptz + $2::interval * g / $3::int AS t) s`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, answer, received_at, answered_at)
SELECT tenant_id, id, kind, 'new', created_at, created_at FROM operations
WHERE created_at >= $1 AND created_at < $1::timestamptz + $2::interval AND $3::int > 0 AND $4::text <> ''`, `
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome)
SELECT id, 1, provider_key, 'w', created_at, created_at, 'ok' FROM operations
WHERE created_at >= $1 AND created_at < $1::timestamptz + $2::interval AND $3::int > 0 AND $4::text <> ''`, `
INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
SELECT tenant_id, provider, 'gen-' || id, id, 'usd', 'succeeded', created_at, created_at FROM operations
WHERE created_at >= $1 AND created_at < $1::timestamptz + $2::interval AND $3::int > 0 AND $4::text <> ''`} {
		if _, err := db.Pool.Exec(ctx, q, from, span, n, prefix); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// The statistics of a table written at a steady rate are always older than its newest
// rows: autovacuum analyzes it after a share of it changed, so the minutes the rollup job
// counts every 15 s lie past the last histogram's end, and the planner, estimating a row
// or two there, once joined each of the window's client requests and attempts to a scan
// of the whole list of the window's operations: a pass of the gateway benchmark at 300
// calls a second took 2.8 s of a core, and the calls answered meanwhile waited for it.
// The counts of a window newer than the statistics stay linear: no list of rows is
// scanned again for each row, and each operation of the window is read at most twice.
func TestCountingAWindowNewerThanTheStatisticsStaysLinear(t *testing.T) {
	testtool.Heavy(t, "a ledger analyzed before its newest calls")
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (name) VALUES ('acme')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `SELECT settle_month_partitions($1::timestamptz - interval '1 month', $1)`, end); err != nil {
		t.Fatal(err)
	}
	// A burst of calls analyzed as autovacuum leaves them, the window's first minute starting
	// in its last second; then the calls of the next 100 s, which the statistics know nothing of.
	fillCalls(t, db, end.Add(-122*time.Second), 3*time.Second, 900, "old-")
	if _, err := db.Pool.Exec(ctx, `ANALYZE operations, client_requests, attempts, provider_charges`); err != nil {
		t.Fatal(err)
	}
	const calls = 6600
	fillCalls(t, db, end.Add(-118*time.Second), 100*time.Second, calls, "new-")
	f := recon.MetricsFilter{Window: recon.Window{From: end.Add(-2 * time.Minute), To: end}, Bucket: time.Minute}
	var inWindow float64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE created_at >= $1 AND created_at < $2`, f.From, f.To).Scan(&inWindow); err != nil {
		t.Fatal(err)
	}
	var opsRead, rescans float64
	var explained []string
	for sql := range rollupstore.CountRawSQL {
		out := explainIn(t, db, "4MB", sql, rollupstore.CountRawArgs(f))
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil {
			t.Fatal(err)
		}
		explained = append(explained, string(out))
		plans[0].Plan.walk(func(n planNode) {
			if n.Rel == "operations" {
				opsRead += (n.Rows + n.Removed) * n.Loops
			}
			if n.Type == "CTE Scan" && n.Loops > 1 {
				rescans += n.Loops
			}
		})
	}
	t.Logf("%.0f rows of operations read, lists scanned again %.0f times", opsRead, rescans)
	if rescans > 0 {
		t.Errorf("a list of rows scanned again %.0f times: the plan is quadratic in the window's calls", rescans)
	}
	if opsRead > 2*inWindow {
		t.Errorf("counting a window of %.0f calls read %.0f rows of operations, want at most %.0f", inWindow, opsRead, 2*inWindow)
	}
	if t.Failed() {
		t.Log(explained)
	}
}
