package pg_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// BenchmarkWritePath breaks one ledger lifecycle (Admit, then Run against a provider that
// answers at once: the lifecycle of the bench module's BenchmarkLifecycle) down into what it
// costs the server, on a private durable cluster of its own, so that no other test's writes
// land in the WAL it reads. Per lifecycle it reports the round trips (statements), the WAL
// records and bytes (from pg_waldump between the insert positions around the run), the heap
// inserts, HOT and non-HOT updates, row locks, the b-tree leaf inserts (index entries), and
// the server's parse-and-plan and executor time (pg_stat_statements with track_planning). Each
// statement mode runs in turn, twice, in the order ABCCBA, so a machine that gets busier
// favours none:
//
//	go test ./ops/pg -run '^$' -bench WritePath -benchtime 4000x
func BenchmarkWritePath(b *testing.B) {
	c := writePathCluster(b)
	modes := []string{"cache_describe", "cache_statement", "generic", "generic", "cache_statement", "cache_describe"}
	for i, mode := range modes {
		b.Run(fmt.Sprintf("%s/%d", mode, 1+i/(len(modes)/2)), func(b *testing.B) { writePathRun(b, c, mode) })
	}
}

// writePathCluster starts the benchmark's durable cluster with pg_stat_statements, and
// removes it when the binary ends.
func writePathCluster(b *testing.B) *localpg.Cluster {
	b.Helper()
	root := filepath.Join(pgtest.ProjectDir(), ".settle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "bench-writepath-")
	if err != nil {
		b.Fatal(err)
	}
	c, err := localpg.Start(context.Background(), localpg.Options{Dir: dir, Durable: true, Settings: map[string]string{
		"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatalf("start a durable postgres: %v", err)
	}
	pgtest.AtExit(func() {
		_ = c.Stop()
		os.RemoveAll(c.Dir)
		os.RemoveAll(dir)
	})
	ctx := context.Background()
	db, err := pg.Open(ctx, c.URL("postgres"))
	if err == nil {
		err = db.Migrate(ctx)
		if err == nil {
			_, err = db.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
		}
		db.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// writePathRun runs b.N lifecycles from 4 clients with statements sent in mode: a pgx
// statement mode named in the connection string, or "generic" for the pool settle serve opens
// on a direct connection (prepared statements, the ledger's writes on generic plans).
func writePathRun(b *testing.B, c *localpg.Cluster, mode string) {
	ctx := context.Background()
	url, opts := c.URL("postgres")+"&default_query_exec_mode="+mode, []pg.Option(nil)
	if mode == "generic" {
		url, opts = c.URL("postgres"), []pg.Option{pg.PreparedWhenDirect()}
	}
	db, err := pg.Open(ctx, url, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	var tid int64
	err = db.Pool.QueryRow(ctx, `WITH t AS (INSERT INTO tenants (name) VALUES ('acme') ON CONFLICT (name) DO NOTHING RETURNING id)
SELECT id FROM t UNION ALL SELECT id FROM tenants WHERE name = 'acme'`).Scan(&tid)
	if err != nil {
		b.Fatal(err)
	}
	run := fmt.Sprintf("w%d", time.Now().UnixNano())
	start := writePathMark(b, db)
	b.ResetTimer()
	t0 := time.Now()
	err = writePathClients(b.N, func(ctx context.Context, i int) error {
		owner := fmt.Sprintf("client-%d", i%4)
		order := fmt.Sprintf("ord-%s-%d", run, i)
		in := ops.Intent{TenantID: tid, Kind: ops.KindRefund, Provider: "stripe", IntentKey: order + ":3800:usd",
			Fingerprint: "fp-" + order, OrderRef: order, CustomerRef: "cus_1", PaymentRef: "pi_1", AmountCents: 3800,
			Currency: "usd", Request: []byte(`{"amount":3800}`), Retention: 24 * time.Hour,
			RequestRef: "req-" + order, Owner: owner}
		o, err := ledger.Admit(ctx, in)
		if err != nil {
			return err
		}
		_, err = ledger.Run(ctx, o.Op, writePathOK, ops.RunSpec{Owner: owner, First: o.Attempt})
		return err
	})
	elapsed := time.Since(t0)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lifecycles/s")
	writePathReport(b, c, db, start, b.N)
}

var writePathOK = ops.SenderFunc(func(_ context.Context, op *ops.Operation, _ *ops.Attempt) ops.AttemptResult {
	return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_" + op.ID,
		Result: &ops.Result{ProviderRef: "re_" + op.ID, ProviderRequestID: "req_" + op.ID}}
})

// writePathClients runs work for i in [0, n) from 4 goroutines.
func writePathClients(n int, work func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := work(context.Background(), i); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// writePathMark checkpoints (so each run pays its own full-page images), resets the
// statement statistics and returns the WAL insert position.
func writePathMark(b *testing.B, db *pg.DB) string {
	ctx := context.Background()
	var lsn string
	_, err := db.Pool.Exec(ctx, "CHECKPOINT")
	if err == nil {
		_, err = db.Pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
	}
	if err == nil {
		err = db.Pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn)
	}
	if err != nil {
		b.Fatal(err)
	}
	return lsn
}

// writePathReport reports the per-lifecycle figures of the run that started at start.
func writePathReport(b *testing.B, c *localpg.Cluster, db *pg.DB, start string, n int) {
	ctx := context.Background()
	var end string
	var walBytes, calls, planMs, execMs float64
	err := db.Pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text,
	(pg_current_wal_insert_lsn() - $1::pg_lsn)::float8`, start).Scan(&end, &walBytes)
	if err == nil {
		err = db.Pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(total_plan_time), 0),
	coalesce(sum(total_exec_time), 0) FROM pg_stat_statements WHERE calls >= $1`, n/2).Scan(&calls, &planMs, &execMs)
	}
	if err != nil {
		b.Fatal(err)
	}
	per := func(v float64) float64 { return v / float64(n) }
	b.ReportMetric(per(calls), "stmts/lifecycle")
	b.ReportMetric(per(planMs*1000), "server_plan_us/lifecycle")
	b.ReportMetric(per(execMs*1000), "server_exec_us/lifecycle")
	b.ReportMetric(per(walBytes), "wal_B/lifecycle")
	recs, err := walRecordStats(c, start, end)
	if err != nil {
		b.Logf("pg_waldump: %v", err)
		return
	}
	b.ReportMetric(per(recs["total"]), "wal_records/lifecycle")
	b.ReportMetric(per(recs["Heap/INSERT"]+recs["Heap/INSERT+INIT"]), "heap_inserts/lifecycle")
	b.ReportMetric(per(recs["Heap/UPDATE"]+recs["Heap/UPDATE+INIT"]), "nonhot_updates/lifecycle")
	b.ReportMetric(per(recs["Heap/HOT_UPDATE"]+recs["Heap/HOT_UPDATE+INIT"]), "hot_updates/lifecycle")
	b.ReportMetric(per(recs["Btree/INSERT_LEAF"]+recs["Btree/SPLIT_L"]+recs["Btree/SPLIT_R"]), "index_entries/lifecycle")
	// A row lock (a foreign key's check, a FOR SHARE) writes a record of its own.
	b.ReportMetric(per(recs["Heap/LOCK"]+recs["Heap2/LOCK_UPDATED"]), "heap_locks/lifecycle")
	b.ReportMetric(per(recs["Transaction/COMMIT"]), "commits/lifecycle")
	b.ReportMetric(per(recs["fpi"]), "full_page_images/lifecycle")
}

// walRecordStats runs pg_waldump --stats=record over [start, end) and returns the count of
// each record type, "total", and "fpi" (full-page images).
func walRecordStats(c *localpg.Cluster, start, end string) (map[string]float64, error) {
	bin, err := localpg.FindBin()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(filepath.Join(bin, "pg_waldump"), "-p", filepath.Join(c.Dir, "pg_wal"),
		"-s", start, "-e", end, "--stats=record").Output()
	if err != nil {
		return nil, err
	}
	recs := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.HasPrefix(f[0], "Type") || strings.HasPrefix(f[0], "-") {
			continue
		}
		n, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		if f[0] == "Total" {
			recs["total"] = n
			continue
		}
		recs[f[0]] = n
		if fpi, err := strconv.ParseFloat(f[5], 64); err == nil {
			recs["fpi"] += fpi
		}
	}
	return recs, sc.Err()
}
