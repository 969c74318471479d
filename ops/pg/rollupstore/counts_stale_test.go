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
// counts every 15 s lie past the last histogram's end, and the planner, expecting a row or
// two there, may join each of the window's client requests, attempts or charges to a scan
// of a whole list of rows (a CTE has no index): a pass of the gateway benchmark at 300
// calls a second once ran 2.8 s where it runs 150 ms. The counts of a window newer than the
// statistics stay linear, whether those statistics saw a burst of calls just before the
// window or none at all (a new install): no list of rows is scanned again for each row, and
// each operation of the window is read at most twice.
func TestCountingAWindowNewerThanTheStatisticsStaysLinear(t *testing.T) {
	testtool.Heavy(t, "ledgers analyzed before their newest calls")
	t.Parallel()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		burst int // calls just before the window and in its first second, analyzed
	}{{"after a burst", 900}, {"on a new install", 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			ctx := context.Background()
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`INSERT INTO tenants (name) VALUES ('acme')`)
			exec(`SELECT settle_month_partitions($1::timestamptz - interval '1 month', $1)`, end)
			if c.burst > 0 {
				fillCalls(t, db, end.Add(-122*time.Second), 3*time.Second, c.burst, "old-")
			}
			exec(`ANALYZE operations, client_requests, attempts, provider_charges`)
			fillCalls(t, db, end.Add(-118*time.Second), 100*time.Second, 6600, "new-")
			// One call in a hundred billed twice: the charges numbered per operation.
			exec(`INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, currency, status, charged_at, seen_at)
SELECT tenant_id, provider, 'gen2-' || id, id, 'usd', 'succeeded', created_at, created_at FROM operations WHERE cost_micros % 100 = 0`)
			assertLinearCount(t, db, recon.MetricsFilter{Window: recon.Window{From: end.Add(-2 * time.Minute), To: end}, Bucket: time.Minute})
		})
	}
}

// assertLinearCount checks the plan of countRaw over f: no list of rows scanned again per
// row, and each operation of the window read at most twice.
func assertLinearCount(t *testing.T, db *pg.DB, f recon.MetricsFilter) {
	t.Helper()
	var inWindow float64
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations WHERE created_at >= $1 AND created_at < $2`,
		f.From, f.To).Scan(&inWindow); err != nil {
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
