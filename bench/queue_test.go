package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

// queueDB holds the operations the queue page benchmarks read.
const queueDB = "bench_queue"

// queueSizes reads SETTLE_BENCH_ROWS, a comma-separated list of operation counts in
// increasing order (default 1,000,000 and 10,000,000).
func queueSizes(b *testing.B) []int {
	b.Helper()
	spec := os.Getenv("SETTLE_BENCH_ROWS")
	if spec == "" {
		spec = "1000000,10000000"
	}
	var out []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			b.Fatalf("bench: SETTLE_BENCH_ROWS=%q: want increasing positive counts", spec)
		}
		out = append(out, n)
	}
	return out
}

// queueLoaded is how many operations bench_queue holds so far; sizes grow by appending.
var queueLoaded int

// BenchmarkQueuePage measures the queries of the operator queue page with the real store
// methods at each size of SETTLE_BENCH_ROWS: the tab counts (from queue_counts), the same
// counts with an age filter (capped index scans), the first page of the unknown tab, a
// page deep into it by keyset cursor, the first page filtered by tenant, and as the
// reference the plain count(*) ... GROUP BY status the counts replace. One more query,
// proposal_counts_older_than_1h, is the age-filtered count as proposed for ops/pg.
func BenchmarkQueuePage(b *testing.B) {
	ctx := context.Background()
	url := database(b, queueDB, true)
	db, err := pg.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tenants := queueTenants(b, db)
	for _, n := range queueSizes(b) {
		if n > queueLoaded {
			start := time.Now()
			loadOperations(b, db, tenants, queueLoaded, n)
			fmt.Printf("loaded %d operations in %s\n", n, time.Since(start).Round(time.Second))
			queueLoaded = n
		}
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		var unknown int64
		if err := db.Pool.QueryRow(ctx, `SELECT sum(n) FROM queue_counts WHERE status = 'unknown'`).Scan(&unknown); err != nil {
			b.Fatal(err)
		}
		deep := &desk.QueueCursor{}
		if err := db.Pool.QueryRow(ctx, `
SELECT created_at, id::text FROM operations WHERE status = 'unknown' ORDER BY created_at, id OFFSET $1 LIMIT 1`,
			unknown/2).Scan(&deep.CreatedAt, &deep.ID); err != nil {
			b.Fatal(err)
		}
		queries := []struct {
			name string
			run  func(ctx context.Context) error
		}{
			{"counts", func(ctx context.Context) error {
				c, err := deskstore.New(db).QueueCounts(ctx, desk.QueueFilter{})
				if err == nil && c[ops.StatusUnknown] != unknown {
					err = fmt.Errorf("unknown count %d, want %d", c[ops.StatusUnknown], unknown)
				}
				return err
			}},
			{"counts_older_than_1h", func(ctx context.Context) error {
				_, err := deskstore.New(db).QueueCounts(ctx, desk.QueueFilter{OlderThan: time.Hour, Now: now})
				return err
			}},
			{"list_unknown_first", func(ctx context.Context) error {
				return wantPage(deskstore.New(db).ListQueue(ctx, desk.QueueFilter{Status: ops.StatusUnknown, Limit: 50}, now))
			}},
			{"list_unknown_deep", func(ctx context.Context) error {
				return wantPage(deskstore.New(db).ListQueue(ctx, desk.QueueFilter{Status: ops.StatusUnknown, Limit: 50, After: deep}, now))
			}},
			{"list_unknown_tenant", func(ctx context.Context) error {
				return wantPage(deskstore.New(db).ListQueue(ctx, desk.QueueFilter{Status: ops.StatusUnknown, TenantID: tenants[len(tenants)-1], Limit: 50}, now))
			}},
			{"proposal_counts_older_than_1h", func(ctx context.Context) error {
				rows, err := db.Pool.Query(ctx, proposedAgedCounts, now.Add(-time.Hour))
				if err != nil {
					return err
				}
				rows.Close()
				return rows.Err()
			}},
			{"reference_count_group_by", func(ctx context.Context) error {
				rows, err := db.Pool.Query(ctx, `SELECT status, count(*) FROM operations GROUP BY status`)
				if err != nil {
					return err
				}
				rows.Close()
				return rows.Err()
			}},
		}
		explain(b, db, n, deep, now, tenants[len(tenants)-1])
		b.Run(fmt.Sprintf("ops=%s", humanCount(n)), func(b *testing.B) {
			for _, q := range queries {
				b.Run(q.name, func(b *testing.B) {
					for b.Loop() {
						if err := q.run(ctx); err != nil {
							b.Fatalf("%s: %v", q.name, err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
				})
			}
		})
	}
}

func wantPage(p desk.QueuePage, err error) error {
	if err == nil && len(p.Ops) != 50 {
		err = fmt.Errorf("page of %d operations, want 50", len(p.Ops))
	}
	return err
}

func humanCount(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.Itoa(n)
}

// queueTenants creates five tenants and returns their ids.
func queueTenants(b *testing.B, db *pg.DB) []int64 {
	b.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
INSERT INTO tenants (name) SELECT 'tenant-' || i FROM generate_series(1, 5) i
ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// loadOperations appends operations from (exclusive of earlier rows) to `to`, one million
// per statement, with the queue_counts trigger off; queue_counts is then rebuilt with one
// GROUP BY and the table vacuumed and analyzed. Keys grow with the row number, as the
// time-ordered ids and keys of real operations do. Of every 10,000 operations: 100 are
// unknown, 50 in progress (with leases long run out), 20 expired, 5 received, 825 failed
// and the rest succeeded; tenants, kinds and providers rotate.
func loadOperations(b *testing.B, db *pg.DB, tenants []int64, from, to int) {
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
	// A bulk load is not what is measured: skip the wait for each chunk's flush and allow
	// more WAL between checkpoints while it runs.
	exec(`SET synchronous_commit = off`)
	exec(`SET maintenance_work_mem = '1GB'`)
	exec(`ALTER SYSTEM SET max_wal_size = '16GB'`)
	exec(`SELECT pg_reload_conf()`)
	exec(`ALTER TABLE operations DISABLE TRIGGER USER`)
	const chunk = 1_000_000
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		exec(`
WITH g AS (
	SELECT i, (i * 7919) % 10000 AS h, $3::bigint[] AS t,
		timestamptz '2026-01-01' + i * interval '2 seconds' AS at
	FROM generate_series($1::bigint, $2::bigint - 1) i
), r AS (
	SELECT i, at, t[1 + i % cardinality(t)] AS tenant_id,
		(ARRAY['refund', 'llm_call', 'llm_job'])[1 + i % 3] AS kind,
		CASE WHEN h < 100 THEN 'unknown' WHEN h < 150 THEN 'in_progress' WHEN h < 170 THEN 'expired'
			WHEN h < 175 THEN 'received' WHEN h < 1000 THEN 'failed' ELSE 'succeeded' END AS status
	FROM g
)
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref,
	amount_cents, currency, status, phase, attempts, lease_owner, lease_until, first_sent_at, retry_until,
	retention_seconds, provider_ref, created_at, updated_at, closed_at, closed_by)
SELECT lpad(to_hex(i), 32, '0')::uuid, tenant_id, kind, CASE kind WHEN 'refund' THEN 'stripe' ELSE 'openai' END,
	lpad(i::text, 12, '0'), 'settle_' || lpad(to_hex(i), 32, '0'), 'fp' || i,
	CASE kind WHEN 'refund' THEN 'ord_' || lpad(i::text, 12, '0') ELSE '' END,
	CASE kind WHEN 'refund' THEN 3800 ELSE 0 END, CASE kind WHEN 'refund' THEN 'usd' ELSE '' END,
	status, CASE status WHEN 'in_progress' THEN 'sending' ELSE '' END,
	CASE status WHEN 'received' THEN 0 ELSE 1 END,
	CASE status WHEN 'in_progress' THEN 'worker-1' ELSE '' END,
	CASE status WHEN 'in_progress' THEN at + interval '5 minutes' END,
	CASE status WHEN 'received' THEN NULL ELSE at END,
	CASE WHEN kind = 'refund' AND status IN ('received', 'in_progress', 'unknown') THEN at + interval '23 hours' END,
	CASE kind WHEN 'refund' THEN 86400 ELSE 0 END,
	CASE status WHEN 'succeeded' THEN 're_' || i ELSE '' END,
	at, at, CASE WHEN status IN ('succeeded', 'failed') THEN at + interval '1 second' END,
	CASE WHEN status IN ('succeeded', 'failed') THEN 'worker-1' ELSE '' END
FROM r`, lo, hi, tenants)
	}
	exec(`DELETE FROM queue_counts`)
	exec(`
INSERT INTO queue_counts (tenant_id, kind, provider, status, shard, n)
SELECT tenant_id, kind, provider, status, 0, count(*) FROM operations
WHERE status IN ('unknown', 'expired') GROUP BY 1, 2, 3, 4`)
	exec(`ALTER TABLE operations ENABLE TRIGGER USER`)
	exec(`VACUUM (ANALYZE) operations`)
	exec(`VACUUM (ANALYZE) queue_counts`)
	exec(`CHECKPOINT`)
	exec(`ALTER SYSTEM RESET max_wal_size`)
	exec(`SELECT pg_reload_conf()`)
}

// proposedAgedCounts is the age-filtered count of ops/pg's QueueCounts with one predicate
// added, o.status IN (the statuses operations_queue_idx holds), which lets the planner prove
// that the partial index applies. Without it the correlated `o.status = s.status` cannot,
// and each capped count scans the whole table. Rows in progress are in no such index since
// migration 00073 (they are read on operations_stalled_idx by their lease), so they are
// left out here. It is measured as the proposed fix; ops/pg is not changed by the benchmarks.
var proposedAgedCounts = `SELECT s.status, (SELECT count(*) FROM (SELECT 1 FROM operations o
WHERE o.status = s.status AND o.status IN ` + pg.UnheldStatuses + ` AND o.created_at <= $1 LIMIT 10001) x)
FROM unnest(` + pg.UnheldStatusArray + `) AS s(status)`

// explain writes the plans of the page's queries at size n to results/explain-<n>.txt, so a
// slow figure comes with its reason.
func explain(b *testing.B, db *pg.DB, n int, deep *desk.QueueCursor, now time.Time, tenant int64) {
	b.Helper()
	ctx := context.Background()
	queries := []struct {
		name, sql string
		args      []any
	}{
		{"counts (QueueCounts, no filter)", `SELECT status, sum(n)::bigint FROM queue_counts
WHERE ($1 = 0 OR tenant_id = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR provider = $3) GROUP BY status`, []any{0, "", ""}},
		{"counts older than 1h (QueueCounts, capped scans)", `SELECT s.status, (SELECT count(*) FROM (SELECT 1 FROM operations o
WHERE o.status = s.status AND true AND o.created_at <= $1 LIMIT 10001) x)
FROM unnest(ARRAY['received', 'in_progress', 'unknown', 'expired']) AS s(status)`, []any{now.Add(-time.Hour)}},
		{"proposal: counts older than 1h with the partial index's predicate", proposedAgedCounts, []any{now.Add(-time.Hour)}},
		{"first page of unknown (ListQueue)", `SELECT o.* FROM operations o WHERE o.status = $1 AND true
ORDER BY o.created_at, o.id LIMIT 51`, []any{"unknown"}},
		{"deep page of unknown (ListQueue with cursor)", `SELECT o.* FROM operations o WHERE o.status = $1 AND true
AND (o.created_at, o.id) > ($2, $3::uuid) ORDER BY o.created_at, o.id LIMIT 51`, []any{"unknown", deep.CreatedAt, deep.ID}},
		{"first page of unknown for one tenant (ListQueue)", `SELECT o.* FROM operations o WHERE o.status = $1 AND o.tenant_id = $2
ORDER BY o.created_at, o.id LIMIT 51`, []any{"unknown", tenant}},
		{"reference: count(*) GROUP BY status", `SELECT status, count(*) FROM operations GROUP BY status`, nil},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "Plans at %d operations (EXPLAIN (ANALYZE, BUFFERS), second execution)\n", n)
	for _, q := range queries {
		var lines []string
		for range 2 {
			rows, err := db.Pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q.sql, q.args...)
			if err != nil {
				b.Fatalf("bench: explain %s: %v", q.name, err)
			}
			if lines, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				b.Fatalf("bench: explain %s: %v", q.name, err)
			}
		}
		fmt.Fprintf(&out, "\n== %s\n%s\n", q.name, strings.Join(lines, "\n"))
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join("results", fmt.Sprintf("explain-%s.txt", humanCount(n)))
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}
