package alertstore_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// ledgerRows writes n refunds created evenly over [from, to), each with its client request
// and one attempt, a charge for every fourth, in a mix of statuses and outcomes. Every
// third is still in progress, so that a close of it later changes an old minute.
func ledgerRows(t *testing.T, f *fixture, tag string, n int, from, to time.Time) {
	t.Helper()
	ctx := context.Background()
	step := to.Sub(from) / time.Duration(n)
	for _, q := range []string{`
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency,
	status, created_at, updated_at, closed_at)
SELECT gen_random_uuid(), @tenant::bigint, 'refund', 'stripe', @tag || i, @tag || i, 'fp', 100 + i, 'usd',
	(ARRAY['succeeded', 'failed', 'in_progress'])[1 + i % 3], @from::timestamptz + i * @step::interval, @from::timestamptz + i * @step::interval,
	CASE WHEN i % 3 < 2 THEN @from::timestamptz + i * @step::interval + interval '1 second' END
FROM generate_series(0, @n::int - 1) i`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
SELECT o.tenant_id, o.id, o.kind, 'r', false, 'new', o.created_at FROM operations o WHERE o.intent_key LIKE @tag || '%'`, `
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, outcome)
SELECT o.id, 1, 'k', 'w', o.created_at, CASE o.status WHEN 'succeeded' THEN 'ok' WHEN 'failed' THEN 'timeout' END
FROM operations o WHERE o.intent_key LIKE @tag || '%'`, `
INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at, seen_at)
SELECT o.tenant_id, 'stripe', 're_' || o.intent_key, o.id, o.amount_cents, 'usd', 'succeeded', o.created_at, o.created_at
FROM operations o WHERE o.intent_key LIKE @tag || '%' AND o.amount_cents % 4 = 0`,
	} {
		if _, err := f.DB.Pool.Exec(ctx, q, pgx.NamedArgs{"tenant": f.Tenant, "tag": tag + "-", "from": from, "step": step, "n": n}); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// rowsReader counts the ledger's rows a call reads: the heap tuples read by sequential
// scans or fetched through an index, and the index entries read, of client_requests,
// operations, attempts and provider_charges with their partitions. The store under it runs
// on a pool of one connection, whose statistics it flushes before reading them, so the
// count is exact.
type rowsReader struct {
	store *alertstore.Store
	pool  *pgxpool.Pool
}

func newRowsReader(t *testing.T, f *fixture) *rowsReader {
	t.Helper()
	cfg := f.DB.Pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &rowsReader{store: alertstore.New(&pg.DB{Pool: pool}), pool: pool}
}

func (r *rowsReader) total(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := r.pool.QueryRow(ctx, `
WITH rels AS (
	SELECT relid FROM unnest(ARRAY['client_requests', 'operations', 'attempts', 'provider_charges']::regclass[]) root,
		LATERAL pg_partition_tree(root))
SELECT (SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM rels))
	+ (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relid IN (SELECT relid FROM rels))`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// counters returns Counters of [from, to) and the ledger's rows it read.
func (r *rowsReader) counters(t *testing.T, from, to time.Time) ([]alerts.Row, int64) {
	t.Helper()
	before := r.total(t)
	rows, err := r.store.Counters(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	return rows, r.total(t) - before
}

// signals flattens rows to one number per labels and signal, for comparing.
func signals(rows []alerts.Row) map[string]float64 {
	out := map[string]float64{}
	for _, r := range rows {
		for s, v := range r.Values {
			if v != 0 {
				out[fmt.Sprintf("%s/%s/%s/%s %s", r.Tenant, r.Kind, r.Provider, r.API, s)] += v
			}
		}
	}
	return out
}

func sameAsRaw(t *testing.T, f *fixture, got []alerts.Row, from, to time.Time) map[string]float64 {
	t.Helper()
	raw, err := f.alerts.RawCounters(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	g, w := signals(got), signals(raw)
	if !reflect.DeepEqual(g, w) {
		var keys []string
		for k := range w {
			if g[k] != w[k] {
				keys = append(keys, fmt.Sprintf("%s: %v, raw %v", k, g[k], w[k]))
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, fmt.Sprintf("%s: %v, raw none", k, g[k]))
			}
		}
		sort.Strings(keys)
		t.Fatalf("counters differ from the raw rows' counts: %v", keys)
	}
	return g
}

// The alert evaluator counts a day's window every minute: the minutes the rollup job has
// settled are read from its rollups, and only the rows after its cut (and the partial minute
// at the window's start) from the raw tables, with the numbers the raw rows give.
func TestADaysWindowReadsOnlyTheRowsAfterTheRollupsCut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := t0
	to := now.Add(45 * time.Second)
	from := to.Add(-24 * time.Hour)
	const old = 1500
	ledgerRows(t, f, "old", old, now.Add(-22*time.Hour), now.Add(-time.Hour))
	// Rows in the partial minute at the window's start, and just before it.
	ledgerRows(t, f, "edge", 4, from.Add(-20*time.Second), from.Add(20*time.Second))
	roll := &recon.Rollups{Store: rollupstore.New(f.DB), Clock: ops.NewManualClock(now)}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("rollups: %+v %v", rep, err)
	}
	// Rows after the pass, after its cut.
	ledgerRows(t, f, "new", 5, now.Add(5*time.Second), now.Add(40*time.Second))

	rr := newRowsReader(t, f)
	got, read := rr.counters(t, from, to)
	sig := sameAsRaw(t, f, got, from, to)
	if n := sig["acme/refund/stripe/ operations"]; n != old+5+2 {
		t.Fatalf("%v operations counted, want %d", n, old+5+2)
	}
	t.Logf("a day's window read %d rows of the ledger's tables (%d operations in it)", read, old+7)
	// Each of the 5 new operations is read by its creation, its request, its attempt and
	// its charges, with a probe of the operation for each; the settled 1,500 not at all.
	if read > 100 {
		t.Fatalf("a day's window read %d rows of the ledger's tables, want only the few after the rollups' cut", read)
	}
}

// An operation of an old minute closed after the rollup job's pass is counted as closed
// once the job's next pass has run: until then the window lags by that pass, as the job's
// own numbers do.
func TestALateCloseOfAnOldMinuteIsCountedAfterTheNextRollupPass(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := t0
	ledgerRows(t, f, "old", 30, now.Add(-5*time.Hour), now.Add(-4*time.Hour))
	clock := ops.NewManualClock(now)
	roll := &recon.Rollups{Store: rollupstore.New(f.DB), Clock: clock}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("rollups: %+v %v", rep, err)
	}
	window := func() map[string]float64 {
		t.Helper()
		to := clock.Now().Add(5 * time.Second)
		got, err := f.alerts.Counters(ctx, to.Add(-6*time.Hour), to)
		if err != nil {
			t.Fatal(err)
		}
		return signals(got)
	}
	const succeeded = "acme/refund/stripe/ succeeded"
	before := window()[succeeded]
	clock.Advance(10 * time.Second)
	var id string
	if err := f.DB.Pool.QueryRow(ctx, `
UPDATE operations SET status = 'succeeded', closed_at = $1, updated_at = $1
WHERE id = (SELECT id FROM operations WHERE status = 'in_progress' ORDER BY created_at LIMIT 1) RETURNING id::text`, clock.Now()).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id) VALUES ($1, 'test', 'close', 'operation', $2)`,
		clock.Now(), id); err != nil {
		t.Fatal(err)
	}
	if n := window()[succeeded]; n != before {
		t.Fatalf("before the next pass: %v succeeded, want the pass's %v", n, before)
	}
	clock.Advance(5 * time.Second)
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	to := clock.Now().Add(5 * time.Second)
	got, err := f.alerts.Counters(ctx, to.Add(-6*time.Hour), to)
	if err != nil {
		t.Fatal(err)
	}
	if n := sameAsRaw(t, f, got, to.Add(-6*time.Hour), to)[succeeded]; n != before+1 {
		t.Fatalf("after the next pass: %v succeeded, want %v", n, before+1)
	}
}

// With the rollup job never run, or its last pass older than rollupstore.RollupStaleAfter
// (the job is down), every number is counted from the raw rows, as before the rollups
// were read.
func TestCountersAreRawWhenTheRollupJobNeverRanOrIsStale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := t0
	const old = 300
	ledgerRows(t, f, "old", old, now.Add(-20*time.Hour), now.Add(-2*time.Hour))
	rr := newRowsReader(t, f)
	check := func(at time.Time, wantRaw bool) {
		t.Helper()
		from := at.Add(-24 * time.Hour)
		got, read := rr.counters(t, from, at)
		sameAsRaw(t, f, got, from, at)
		if raw := read >= 3*old; raw != wantRaw {
			t.Fatalf("at %s: read %d rows of the ledger's tables, want raw counting %v", at.Format(time.TimeOnly), read, wantRaw)
		}
	}
	check(now, true)
	if _, err := (&recon.Rollups{Store: rollupstore.New(f.DB), Clock: ops.NewManualClock(now)}).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	check(now.Add(30*time.Second), false)
	check(now.Add(rollupstore.RollupStaleAfter+time.Second), true)
}
