package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/web"
)

// insightsDB holds the workload the reconciliation and insights benchmarks read.
const insightsDB = "bench_insights"

// insightsNow is the benchmark's clock: the loaded month ends here.
var insightsNow = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// insightsSize reads SETTLE_BENCH_INSIGHTS_ROWS, the number of operations (default 10 M).
func insightsSize(b *testing.B) int {
	b.Helper()
	n := 10_000_000
	if s := os.Getenv("SETTLE_BENCH_INSIGHTS_ROWS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("bench: SETTLE_BENCH_INSIGHTS_ROWS=%q: want a positive count", s)
		}
		n = v
	}
	return n
}

var insightsLoaded bool

// BenchmarkInsights measures the server side of the reconciliation and insights pages on
// rollups built by the real rollup job over a month of operations: the store queries alone
// (RollupMetrics, BacklogSeries) and whole pages rendered by the real handlers for a
// signed-in manager, plus one steady-state pass of the job and, as the reference, the raw
// count of one day that the rollups replace.
func BenchmarkInsights(b *testing.B) {
	ctx := context.Background()
	n := insightsSize(b)
	db, err := pg.Open(ctx, database(b, insightsDB, true))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	clock := ops.NewManualClock(insightsNow)
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock}
	if !insightsLoaded {
		start := time.Now()
		loadWorkload(b, db, n)
		fmt.Printf("loaded %d operations with their requests, attempts and charges in %s\n", n, time.Since(start).Round(time.Second))
		start = time.Now()
		passes := 0
		for {
			rep, err := roll.RunOnce(ctx)
			if err != nil {
				b.Fatal(err)
			}
			passes++
			if rep.CaughtUp {
				break
			}
		}
		fmt.Printf("first rollup over the month: %d passes in %s\n", passes, time.Since(start).Round(time.Second))
		var minutes, quarters, hours int64
		_ = db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE width_seconds = 60), count(*) FILTER (WHERE width_seconds = 900),
	count(*) FILTER (WHERE width_seconds = 3600) FROM rollups`).Scan(&minutes, &quarters, &hours)
		fmt.Printf("rollup rows: %d per minute, %d per quarter hour, %d per hour\n", minutes, quarters, hours)
		if _, err := db.Pool.Exec(ctx, `VACUUM (ANALYZE) rollups, rollup_money, backlog_snapshots`); err != nil {
			b.Fatal(err)
		}
		insightsLoaded = true
	}
	page := func(span, bucket time.Duration) recon.MetricsFilter {
		to := insightsNow.Truncate(bucket).Add(bucket)
		return recon.MetricsFilter{Window: recon.Window{From: to.Add(-span), To: to}, Bucket: bucket}
	}
	srv, client, base := insightsServer(b, db, clock)
	defer srv.Close()
	queries := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"reconcile_24h_hourly", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).RollupMetrics(ctx, page(24*time.Hour, time.Hour)))
		}},
		{"reconcile_7d_hourly", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).RollupMetrics(ctx, page(7*24*time.Hour, time.Hour)))
		}},
		{"reconcile_30d_daily", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).RollupMetrics(ctx, page(30*24*time.Hour, 24*time.Hour)))
		}},
		{"insights_24h_series", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).RollupMetrics(ctx, page(24*time.Hour, 15*time.Minute)))
		}},
		{"insights_30d_backlog", func(ctx context.Context) error {
			f := page(30*24*time.Hour, 24*time.Hour)
			p, err := rollupstore.New(db).BacklogSeries(ctx, recon.BacklogFilter{Window: f.Window, Bucket: f.Bucket})
			if err == nil && len(p) == 0 {
				err = fmt.Errorf("no backlog points")
			}
			return err
		}},
		{"page_reconcile_24h", getPage(client, base+"/reconcile?range=24h&bucket=hour")},
		{"page_reconcile_7d", getPage(client, base+"/reconcile?range=7d&bucket=hour")},
		{"page_reconcile_30d", getPage(client, base+"/reconcile?range=30d&bucket=day")},
		{"page_insights_24h", getPage(client, base+"/insights?range=24h")},
		{"page_insights_7d", getPage(client, base+"/insights?range=7d")},
		{"page_insights_30d", getPage(client, base+"/insights?range=30d")},
		{"rollup_pass_steady", func(ctx context.Context) error {
			_, err := roll.RunOnce(ctx)
			return err
		}},
		{"reference_raw_24h_hourly", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).ReconMetrics(ctx, page(24*time.Hour, time.Hour)))
		}},
	}
	b.Run(fmt.Sprintf("ops=%s", humanCount(n)), func(b *testing.B) {
		for _, q := range queries {
			b.Run(q.name, func(b *testing.B) {
				for b.Loop() {
					if err := q.run(ctx); err != nil {
						b.Fatalf("%s: %v", q.name, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			})
		}
	})
}

func wantRows(rows []recon.MetricsRow, err error) error {
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("no rows")
	}
	return err
}

// getPage returns a request of one page by the signed-in manager: the server's whole time,
// the session and user lookups included, measured from the client on the same machine.
func getPage(c *http.Client, u string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s = %d", u, resp.StatusCode)
		}
		return nil
	}
}

// insightsServer serves the pages with the real handlers and signs a manager in.
func insightsServer(b *testing.B, db *pg.DB, clock ops.Clock) (*httptest.Server, *http.Client, string) {
	b.Helper()
	ctx := context.Background()
	s := &web.Server{Accounts: accountstore.New(db), Queues: deskstore.New(db), DB: db, Clock: clock, Logger: slog.New(slog.DiscardHandler),
		Sessions: web.NewSessions(pgxstore.NewWithCleanupInterval(db.Pool, 0), false), Registry: prometheus.NewRegistry()}
	rollups := rollupstore.New(db)
	s.Recon, s.Exceptions, s.Operations = rollups, reconstore.New(db), db
	s.Insights, s.Firings = rollups, alertstore.New(db)
	s.Kinds = testworld.RegisterKinds(ops.NewLedger(db, clock))
	ts := httptest.NewServer(s.Handler())
	email := "manager-" + runID() + "@bench.settle"
	if _, err := accountstore.New(db).CreateUser(ctx, email, "bench password 123", desk.RoleManager); err != nil {
		b.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(ts.URL+"/login", url.Values{"email": {email}, "password": {"bench password 123"}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("bench: sign in = %d", resp.StatusCode)
	}
	return ts, c, ts.URL
}

// loadWorkload writes n operations spread evenly over the 30 days before insightsNow, with
// what the ledger records beside them, one million operations per statement with the
// triggers off (queue_counts is rebuilt at the end). Of every 1,000 operations: 860
// succeed, 100 fail, 25 are unknown and 15 expired; each has one client request and one
// attempt; every 10th was asked for again and answered from its stored result (a replay),
// every 25th again while in flight (409); every 20th timed out once before a second
// attempt; each succeeded refund has a provider charge and every 500th operation a second
// one (a double charge); one charge in 10,000 names no operation. Tenants (5), kinds (3)
// and providers rotate.
func loadWorkload(b *testing.B, db *pg.DB, n int) {
	b.Helper()
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string, args ...any) {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("bench: load: %v\n%s", err, sql)
		}
	}
	tenants := queueTenants(b, db)
	exec(`SET synchronous_commit = off`)
	exec(`SET maintenance_work_mem = '1GB'`)
	exec(`ALTER SYSTEM SET max_wal_size = '16GB'`)
	exec(`SELECT pg_reload_conf()`)
	exec(`ALTER TABLE operations DISABLE TRIGGER USER`)
	span := 30 * 24 * time.Hour
	step := float64(span.Microseconds()) / float64(n)
	from := insightsNow.Add(-span)
	const chunk = 1_000_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		args := []any{lo, hi, tenants, from, step}
		exec(`
WITH g AS (
	SELECT i, i % 1000 AS h, $4::timestamptz + make_interval(secs => i * $5::float8 / 1e6) AS at, $3::bigint[] AS t
	FROM generate_series($1::bigint, $2::bigint - 1) i
)
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency, cost_micros,
	status, attempts, provider_ref, created_at, updated_at, closed_at, closed_by)
SELECT lpad(to_hex(i), 32, '0')::uuid, t[1 + i % cardinality(t)], (ARRAY['refund', 'llm_call', 'llm_job'])[1 + i % 3],
	CASE i % 3 WHEN 0 THEN 'stripe' ELSE 'openai' END, 'i' || i, 'settle_' || i, 'fp',
	CASE i % 3 WHEN 0 THEN 3800 ELSE 0 END, CASE i % 3 WHEN 0 THEN 'usd' ELSE '' END, CASE i % 3 WHEN 0 THEN 0 ELSE 1200 END,
	CASE WHEN h < 860 THEN 'succeeded' WHEN h < 960 THEN 'failed' WHEN h < 985 THEN 'unknown' ELSE 'expired' END,
	1, CASE WHEN h < 860 THEN 're_' || i ELSE '' END, at, at,
	CASE WHEN h < 960 THEN at + interval '1 second' END, CASE WHEN h < 960 THEN 'worker-1' ELSE '' END
FROM g`, args...)
		exec(`
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at, answered_at)
SELECT o.tenant_id, o.id, o.kind, 'r', d.dup, d.answer, o.created_at + d.after, o.created_at + d.after
FROM operations o CROSS JOIN LATERAL (VALUES (false, 'new', interval '0'), (true, 'replayed', interval '30 seconds'),
	(true, 'in_progress', interval '200 milliseconds')) d(dup, answer, after)
WHERE o.created_at >= $1 AND o.created_at < $2
	AND (NOT d.dup OR (d.answer = 'replayed' AND ('x' || substr(o.id::text, 25, 8))::bit(32)::bigint % 10 = 0)
		OR (d.answer = 'in_progress' AND ('x' || substr(o.id::text, 25, 8))::bit(32)::bigint % 25 = 0))`,
			from.Add(time.Duration(float64(lo)*step)*time.Microsecond), from.Add(time.Duration(float64(hi)*step)*time.Microsecond))
		exec(`
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome)
SELECT o.id, a.n, o.provider_key, 'worker-1', o.created_at + a.after, o.created_at + a.after + interval '1 second', a.outcome
FROM operations o CROSS JOIN LATERAL (VALUES (1, 'ok', interval '0'), (1, 'timeout', interval '0'), (2, 'ok', interval '20 seconds')) a(n, outcome, after)
WHERE o.created_at >= $1 AND o.created_at < $2
	AND CASE WHEN ('x' || substr(o.id::text, 25, 8))::bit(32)::bigint % 20 = 0 THEN a.outcome = 'timeout' OR a.n = 2 ELSE a.n = 1 AND a.outcome = 'ok' END`,
			from.Add(time.Duration(float64(lo)*step)*time.Microsecond), from.Add(time.Duration(float64(hi)*step)*time.Microsecond))
		exec(`
INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at, seen_at)
SELECT o.tenant_id, o.provider, c.ref || o.provider_ref, o.id, o.amount_cents, o.currency, 'succeeded', o.created_at + c.after, o.created_at + c.after
FROM operations o CROSS JOIN LATERAL (VALUES ('', interval '2 seconds'), ('dup_', interval '1 hour')) c(ref, after)
WHERE o.created_at >= $1 AND o.created_at < $2 AND o.kind = 'refund' AND o.status = 'succeeded'
	AND (c.ref = '' OR ('x' || substr(o.id::text, 25, 8))::bit(32)::bigint % 500 = 0)`,
			from.Add(time.Duration(float64(lo)*step)*time.Microsecond), from.Add(time.Duration(float64(hi)*step)*time.Microsecond))
	}
	exec(`
INSERT INTO provider_charges (provider, charge_ref, amount_cents, currency, status, charged_at, seen_at)
SELECT 'stripe', 're_orphan_' || i, 1200, 'usd', 'succeeded', $1::timestamptz + i * interval '1 minute', $1::timestamptz + i * interval '1 minute'
FROM generate_series(0, $2::int - 1) i`, from, max(1, n/10_000))
	exec(`DELETE FROM queue_counts`)
	exec(`
INSERT INTO queue_counts (tenant_id, kind, provider, status, shard, n)
SELECT tenant_id, kind, provider, status, 0, count(*) FROM operations
WHERE status IN ('unknown', 'expired') GROUP BY 1, 2, 3, 4`)
	exec(`ALTER TABLE operations ENABLE TRIGGER USER`)
	// A month of backlog snapshots, as a job running every minute would have left: one per
	// minute and group, and the last of each hour, each with its marker row.
	for _, width := range []int{60, 3600} {
		exec(`
INSERT INTO backlog_snapshots (width_seconds, at, tenant_id, kind, provider, status, n, oldest_at, taken_at)
SELECT $3::int, m.at, g.tenant_id, g.kind, g.provider, g.status, g.n, m.at - interval '3 hours', m.at
FROM generate_series($1::timestamptz, $2::timestamptz - make_interval(secs => $3::int), make_interval(secs => $3::int)) m(at)
CROSS JOIN (SELECT tenant_id, kind, provider, status, sum(n)::bigint AS n FROM queue_counts GROUP BY 1, 2, 3, 4
	UNION ALL SELECT 0, '', '', 'unknown', 0) g`, from, insightsNow, width)
		exec(`UPDATE backlog_snapshots SET oldest_at = NULL WHERE tenant_id = 0 AND width_seconds = $1`, width)
	}
	exec(`VACUUM (ANALYZE) operations, client_requests, attempts, provider_charges, backlog_snapshots`)
	exec(`CHECKPOINT`)
	exec(`ALTER SYSTEM RESET max_wal_size`)
	exec(`SELECT pg_reload_conf()`)
}
