package rollupstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
			exec := acmeLedger(t, db, end, 1)
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

// A count whose cost the planner overestimates (the window's operations are a CTE without
// statistics, so a one-to-one join of its calls' requests was taken for thirty times their
// number: 2.9 million for 6,000 calls) passed every JIT threshold, and the server compiled
// 145 functions before running it: 1.5–2.8 s of a core every rollup pass in the gateway
// benchmark, for a statement of 150 ms. However high the estimate (here every threshold at
// zero), the counts are never compiled.
func TestCountingIsNeverCompiled(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (name) VALUES ('acme')`); err != nil {
		t.Fatal(err)
	}
	fillCalls(t, db, end.Add(-2*time.Minute), 2*time.Minute, 100, "c-")
	f := recon.MetricsFilter{Window: recon.Window{From: end.Add(-2 * time.Minute), To: end}, Bucket: time.Minute}
	// Every path that counts turns compilation off in its transaction first: the table's
	// raw count, the alert windows' counts and the rollup pass.
	sent := &sentSQL{}
	cfg := db.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = sent
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	traced := rollupstore.New(&pg.DB{Pool: pool})
	hour := recon.MetricsFilter{Window: recon.Window{From: end.Add(-time.Hour), To: end}, Bucket: time.Hour}
	// In this order: once a rollup pass has covered the window, the alert windows read its
	// rollups and count no raw row, which would leave nothing here to check.
	for _, path := range []struct {
		name string
		run  func() error
	}{
		{"the table's raw count", func() error { _, err := traced.ReconMetrics(ctx, hour); return err }},
		{"the alert windows", func() error { _, err := traced.WindowCountsAll(ctx, []recon.Window{f.Window}); return err }},
		{"a rollup pass", func() error {
			_, err := traced.RunRollups(ctx, recon.RollupParams{Now: end, Overlap: time.Minute, MaxSpan: time.Hour})
			return err
		}},
	} {
		name := path.name
		sent.sqls = nil
		if err := path.run(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		off, count := slices.Index(sent.sqls, rollupstore.NoJITSQL), slices.IndexFunc(sent.sqls, func(q string) bool {
			return strings.HasPrefix(strings.TrimSpace(q), "WITH")
		})
		if off < 0 || count < 0 || off > count {
			t.Errorf("%s turned compilation off at statement %d and counted at %d, want it off before counting", name, off, count)
		}
	}
	for sql := range rollupstore.CountRawSQL {
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('jit_above_cost', '0', true), set_config('jit_inline_above_cost', '0', true),
	set_config('jit_optimize_above_cost', '0', true)`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, rollupstore.NoJITSQL); err != nil {
				return err
			}
			var out []byte
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, rollupstore.CountRawArgs(f)).Scan(&out); err != nil {
				return err
			}
			var plans []map[string]any
			if err := json.Unmarshal(out, &plans); err != nil {
				return err
			}
			if jit, ok := plans[0]["JIT"]; ok {
				t.Errorf("the count was compiled: %v", jit)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sentSQL records the text of every statement a pool sends.
type sentSQL struct{ sqls []string }

func (s *sentSQL) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.sqls = append(s.sqls, d.SQL)
	return ctx
}

func (s *sentSQL) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
