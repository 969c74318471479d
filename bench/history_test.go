package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// historySizes reads SETTLE_BENCH_HISTORY, the closed operations of history loaded before
// the measures: one count or several separated by commas, each its own database. Each
// operation comes with four more rows (its client request, attempt and two audit rows), so
// the default, 200000,1000000,6000000, is 1 M, 5 M and 30 M rows of history.
func historySizes(b *testing.B) []int {
	b.Helper()
	s := os.Getenv("SETTLE_BENCH_HISTORY")
	if s == "" {
		return []int{200_000, 1_000_000, 6_000_000}
	}
	var ns []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			b.Fatalf("bench: SETTLE_BENCH_HISTORY=%q: want positive counts separated by commas", s)
		}
		ns = append(ns, v)
	}
	return ns
}

// historyLoaded says which history databases this run has filled.
var historyLoaded = map[string]bool{}

// historyTimes holds, per size and measure, the best time of one op over the rounds.
var historyTimes = map[string]map[string]float64{}

// historyRounds is how many times the databases are measured in turn: the machine's load
// changes over minutes, and taking each figure's best round compares the sizes under the
// same conditions rather than under whatever ran beside each.
const historyRounds = 3

// BenchmarkHistory measures what a long history could slow down, at an empty history and at
// SETTLE_BENCH_HISTORY closed operations spread over the retention's 13 months (each with a
// client request, an attempt and two audit rows, in their monthly partitions, and the
// rollups of those months), with the same open backlog and the same last 35 days of rollups
// in both: the /ops queue page's counts and first page of unknowns, the /insights page's
// queries (24 h by quarter hour, 30 days by day), and the ledger's write rate (whole
// lifecycles, 4 clients, durable). It ends with each figure at the long history as a ratio
// of the same at the empty one.
func BenchmarkHistory(b *testing.B) {
	sizes := []historyShape{{0, false}, {0, true}}
	for _, n := range historySizes(b) {
		sizes = append(sizes, historyShape{n, true})
	}
	dbs := map[historyShape]*pg.DB{}
	for _, h := range sizes {
		name := fmt.Sprintf("bench_history_%d_%t", h.n, h.months)
		db, err := pg.Open(context.Background(), database(b, name, true), pg.PreparedWhenDirect())
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if !historyLoaded[name] {
			start := time.Now()
			loadHistory(b, db, h)
			fmt.Printf("loaded %s in %s\n", h, time.Since(start).Round(time.Second))
			historyLoaded[name] = true
		}
		dbs[h] = db
		historyTimes[h.String()] = map[string]float64{}
	}
	for round := 1; round <= historyRounds; round++ {
		for _, h := range sizes {
			b.Run(fmt.Sprintf("round=%d/%s", round, h), func(b *testing.B) { historyMeasures(b, dbs[h], h.String()) })
		}
	}
	base := sizes[0].String()
	fmt.Printf("\nbest of %d rounds, and each as a ratio of %s\n%-22s", historyRounds, base, "measure")
	for _, h := range sizes {
		fmt.Printf(" %24s", h)
	}
	fmt.Println()
	for _, m := range []string{"queue_counts", "queue_unknown_first", "insights_24h", "insights_30d", "ledger_lifecycle"} {
		fmt.Printf("%-22s", m)
		for _, h := range sizes {
			v := historyTimes[h.String()][m]
			fmt.Printf(" %14.3fms %7.2fx", v, v/historyTimes[base][m])
		}
		fmt.Println()
	}
	fmt.Println()
}

// historyShape is one database of the benchmark: n closed operations of history, and
// whether the 16 months' partitions a year of running leaves are there (without them, only
// the months the migration made: this one and the next two).
type historyShape struct {
	n      int
	months bool
}

// String names the shape in the benchmark's name: history=empty, history=empty_16months,
// history=1M.
func (h historyShape) String() string {
	switch {
	case h.n > 0:
		return "history=" + humanCount(h.n)
	case h.months:
		return "history=empty_16months"
	}
	return "history=empty"
}

// record keeps ms as the time of measure at size if it is the best so far.
func record(size, measure string, ms float64) {
	if old, ok := historyTimes[size][measure]; !ok || ms < old {
		historyTimes[size][measure] = ms
	}
}

// historyMeasures runs the measures on db, recording each one's time per op under size.
func historyMeasures(b *testing.B, db *pg.DB, size string) {
	now := time.Now().UTC()
	page := func(span, bucket time.Duration) recon.MetricsFilter {
		to := now.Truncate(bucket).Add(bucket)
		return recon.MetricsFilter{Window: recon.Window{From: to.Add(-span), To: to}, Bucket: bucket}
	}
	ledger := testworld.RegisterKinds(ops.NewLedger(db, ops.SystemClock{}))
	tid := tenant(b, db.Pool)
	measures := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"queue_counts", func(ctx context.Context) error {
			_, err := deskstore.New(db).QueueCounts(ctx, desk.QueueFilter{})
			return err
		}},
		{"queue_unknown_first", func(ctx context.Context) error {
			return wantPage(deskstore.New(db).ListQueue(ctx, desk.QueueFilter{Status: ops.StatusUnknown, Limit: 50}, now))
		}},
		{"insights_24h", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).RollupMetrics(ctx, page(24*time.Hour, 15*time.Minute)))
		}},
		{"insights_30d", func(ctx context.Context) error {
			return wantRows(rollupstore.New(db).RollupMetrics(ctx, page(30*24*time.Hour, 24*time.Hour)))
		}},
	}
	ctx := context.Background()
	for _, m := range measures {
		b.Run(m.name, func(b *testing.B) {
			for b.Loop() {
				if err := m.run(ctx); err != nil {
					b.Fatalf("%s: %v", m.name, err)
				}
			}
			ms := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(ms, "ms/op")
			record(size, m.name, ms)
		})
	}
	b.Run("ledger_lifecycle", func(b *testing.B) {
		run := runID()
		b.ResetTimer()
		elapsed, err := runClients(b.N, func(ctx context.Context, i int) error {
			owner := fmt.Sprintf("client-%d", i%clients)
			o, err := ledger.Admit(ctx, admitted(intent(tid, run, i), fmt.Sprintf("req-%s-%d", run, i), owner))
			if err != nil {
				return err
			}
			op, err := ledger.Run(ctx, o.Op, okSender, ops.RunSpec{Owner: owner, First: o.Attempt})
			if err == nil && op.Status != ops.StatusSucceeded {
				err = fmt.Errorf("operation %s is %s", op.ID, op.Status)
			}
			return err
		})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lifecycles/s")
		record(size, "ledger_lifecycle", float64(elapsed.Microseconds())/1000/float64(b.N))
	})
}

// loadHistory writes, straight in SQL, n closed operations spread over the last 395 days
// with their client request, attempt and two audit rows (the months' partitions created
// first, as the retention role keeps them), the rollups of those days (hours and quarter
// hours for good, minutes for 35 days, 15 groups), and the same open backlog at any n: 2,000
// unknown operations of the last day. At n = 0 there is no closed history, only the rollups
// of the last 35 days.
func loadHistory(b *testing.B, db *pg.DB, h historyShape) {
	n := h.n
	b.Helper()
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string, args ...any) {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("bench: load history: %v\n%s", err, sql)
		}
	}
	tid := tenant(b, db.Pool)
	exec(`SET synchronous_commit = off`)
	exec(`SET maintenance_work_mem = '512MB'`)
	if h.months {
		exec(`SELECT settle_month_partitions(now() - interval '14 months', now() + interval '2 months')`)
	}
	span := 395 * 24 * time.Hour
	from := time.Now().UTC().Add(-span - 24*time.Hour)
	step := float64(span.Microseconds()) / float64(max(n, 1))
	const chunk = 1_000_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		exec(`
WITH o AS (
	INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency,
		status, attempts, provider_ref, retention_seconds, created_at, updated_at, closed_at, closed_by)
	SELECT gen_random_uuid(), $3, 'refund', 'stripe', 'h' || i, 'settle_h' || i, 'fp', 3800, 'usd',
		CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 're_h' || i, 86400, at, at + interval '1 second',
		at + interval '1 second', 'worker-1'
	FROM (SELECT i, $4::timestamptz + make_interval(secs => i * $5::float8 / 1e6) AS at
		FROM generate_series($1::bigint, $2::bigint - 1) i) g
	RETURNING id, tenant_id, kind, provider_key, created_at
), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, answer, received_at, answered_at)
	SELECT tenant_id, id, kind, 'r', 'new', created_at, created_at FROM o
), a AS (
	INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome, http_status)
	SELECT id, 1, provider_key, 'worker-1', created_at, created_at + interval '1 second', 'ok', 200 FROM o
)
INSERT INTO audit_log (at, actor, action, entity, entity_id)
SELECT o.created_at + d.after, 'worker-1', d.action, 'operation', o.id::text
FROM o CROSS JOIN (VALUES ('open', interval '0'), ('attempt.ok', interval '1 second')) d(action, after)`,
			lo, hi, tid, from, step)
	}
	exec(`
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, attempts,
	retention_seconds, created_at, updated_at)
SELECT gen_random_uuid(), $1, 'refund', 'stripe', 'u' || i, 'settle_u' || i, 'fp', 'unknown', 1, 86400,
	now() - i * interval '40 seconds', now() - i * interval '40 seconds'
FROM generate_series(1, 2000) i`, tid)
	// Both sizes have the rollups of the last 35 days, which the pages read; the long history
	// adds the quarter hours and hours of the months before.
	minutesFrom := time.Now().UTC().Add(-35 * 24 * time.Hour)
	rollupsFrom := minutesFrom
	if n > 0 {
		rollupsFrom = from
	}
	for _, lv := range []struct {
		width int
		from  time.Time
	}{{60, minutesFrom}, {900, rollupsFrom}, {3600, rollupsFrom}} {
		exec(`
INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, client_requests, operations, succeeded, failed,
	attempts, attempts_sent, charges, computed_at)
SELECT $1, s, g % 5 + 1, (ARRAY['refund', 'llm_call', 'llm_job'])[g % 3 + 1], 'stripe', 10, 10, 9, 1, 10, 10, 9, now()
FROM generate_series(date_bin(make_interval(secs => $1), $2::timestamptz, '2000-01-01'), now(), make_interval(secs => $1)) s,
	generate_series(0, 14) g`, lv.width, lv.from)
	}
	exec(`VACUUM (ANALYZE) operations, client_requests, attempts, audit_log, rollups, queue_counts`)
	exec(`CHECKPOINT`)
}
