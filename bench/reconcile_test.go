package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/stripe"
)

// reconcileSizes reads SETTLE_BENCH_REFUNDS, a comma-separated list of refund counts in
// increasing order (default 100,000 and 1,000,000).
func reconcileSizes(b *testing.B) []int {
	b.Helper()
	spec := os.Getenv("SETTLE_BENCH_REFUNDS")
	if spec == "" {
		spec = "100000,1000000"
	}
	var out []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			b.Fatalf("bench: SETTLE_BENCH_REFUNDS=%q: want increasing positive counts", spec)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkReconcileListing reconciles a window of n refunds that Settle made, listed from
// the fake Stripe through stripe-go with the read limiter out of the way, against a ledger
// holding their n succeeded operations and the charges the write path recorded: the first run
// marks every charge reconciled, the second reads the window again and finds nothing to do. The reference in the same run is the listing alone (listed_only_s): what
// is left is the matching. Each size runs once; its figures are the metrics.
func BenchmarkReconcileListing(b *testing.B) {
	ctx := context.Background()
	// settle runs with the collector's target at 400 unless GOGC is given (cmd/settle's
	// tuneGC); the reconciler is measured the way it runs.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	for _, n := range reconcileSizes(b) {
		b.Run(fmt.Sprintf("refunds=%d", n), func(b *testing.B) {
			name := fmt.Sprintf("bench_recon_%d", n)
			db, err := pg.Open(ctx, database(b, name, true))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			to := from.Add(30 * 24 * time.Hour)
			fk, base := seedReconcile(b, db, n, from, to)
			defer fk.Close()
			adapter := stripe.New(stripe.Config{APIKey: "sk_test_bench", BaseURL: base, ReadsPerSecond: 1e6, Accounts: db})
			r := &recon.Reconciler{Ledger: ops.NewLedger(db, ops.NewManualClock(to.Add(time.Hour))), Store: reconstore.New(db), Events: db, Leases: db,
				Refunds: []recon.RefundSource{adapter}, Owner: "bench"}
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				listed := 0
				if err := adapter.ListRefunds(ctx, from, to, func(batch []ops.ProviderRecord) error {
					listed += len(batch)
					return nil
				}); err != nil || listed != n {
					b.Fatalf("listing: %d of %d (%v)", listed, n, err)
				}
				listOnly := time.Since(start)
				first := reconcileOnce(b, r, from, to, n)
				again := reconcileOnce(b, r, from, to, n)
				var mem runtime.MemStats
				runtime.ReadMemStats(&mem)
				b.ReportMetric(listOnly.Seconds(), "listed_only_s")
				b.ReportMetric(first.Seconds(), "first_run_s")
				b.ReportMetric(again.Seconds(), "second_run_s")
				b.ReportMetric(first.Seconds()/listOnly.Seconds(), "first/listing")
				b.ReportMetric(float64(mem.HeapSys)/(1<<20), "heap_sys_MiB")
			}
		})
	}
}

// reconcileOnce runs the reconciler over the window and checks it saw every refund, each a
// charge the ledger knew, and found nothing wrong.
func reconcileOnce(b *testing.B, r *recon.Reconciler, from, to time.Time, n int) time.Duration {
	b.Helper()
	start := time.Now()
	rep, err := r.Reconcile(context.Background(), "stripe", recon.Window{From: from, To: to})
	took := time.Since(start)
	if err != nil || rep.Listed != n || rep.NewCharges != 0 || rep.Orphans+rep.DoubleCharges+rep.Missing != 0 {
		b.Fatalf("reconcile: %+v (%v)", rep, err)
	}
	return took
}

// seedReconcile writes n succeeded refund operations spread over [from, to) and gives the
// fake Stripe their n refunds, each naming its operation, in creation order.
func seedReconcile(b *testing.B, db *pg.DB, n int, from, to time.Time) (*fake.Stripe, string) {
	b.Helper()
	ctx := context.Background()
	step := to.Sub(from) / time.Duration(n)
	for _, q := range []string{
		`INSERT INTO tenants (name) VALUES ('bench') ON CONFLICT DO NOTHING`,
		`ALTER TABLE operations DISABLE TRIGGER USER`,
		fmt.Sprintf(`INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref,
	amount_cents, currency, status, attempts, first_sent_at, retention_seconds, provider_ref, created_at, updated_at,
	closed_at, closed_by)
SELECT lpad(to_hex(i), 32, '0')::uuid, (SELECT id FROM tenants WHERE name = 'bench'), 'refund', 'stripe',
	lpad(i::text, 12, '0'), 'settle_' || lpad(to_hex(i), 32, '0'), 'fp' || i, 'ord_' || i, 3800, 'usd', 'succeeded', 1,
	at, 86400, 're_bench_' || i, at, at, at + interval '1 second', 'worker-1'
FROM (SELECT i, $1::timestamptz + (i - 1) * interval '%d microseconds' AS at FROM generate_series(1, %d) i) s`,
			step.Microseconds(), n),
		`ALTER TABLE operations ENABLE TRIGGER USER`,
		// The write path records each refund's charge as it succeeds; no run has seen it yet.
		`INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at, seen_at)
SELECT tenant_id, 'stripe', provider_ref, id, amount_cents, currency, 'succeeded', closed_at, closed_at FROM operations`,
		`VACUUM (ANALYZE) operations`,
		`VACUUM (ANALYZE) provider_charges`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, from)
		}
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			b.Fatalf("bench: seed: %v", err)
		}
	}
	rs := make([]fake.Refund, n)
	for i := range n {
		id := fmt.Sprintf("%032x", i+1)
		rs[i] = fake.Refund{ID: "re_bench_" + strconv.Itoa(i+1), PaymentIntent: "pi_bench_" + strconv.Itoa(i+1), Currency: "usd",
			Status: "succeeded", Amount: 3800, Created: from.Add(time.Duration(i) * step),
			Metadata: map[string]string{stripe.MetadataKey: id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]}}
	}
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	if err := fk.ImportRefunds(rs); err != nil {
		b.Fatal(err)
	}
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return fk, base
}
