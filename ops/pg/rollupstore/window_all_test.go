package rollupstore_test

import (
	"context"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// rawRanges records the [from, to) of every countRaw statement a pool runs: one range of
// raw rows counted per countRaw call.
type rawRanges struct {
	mu     sync.Mutex
	ranges map[string][]recon.Window // by query text
	stmts  int
}

func (rr *rawRanges) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.stmts++
	if !rollupstore.CountRawSQL[d.SQL] || len(d.Args) != 1 {
		return ctx
	}
	if a, ok := d.Args[0].(pgx.NamedArgs); ok {
		rr.ranges[d.SQL] = append(rr.ranges[d.SQL], recon.Window{From: a["from"].(time.Time), To: a["to"].(time.Time)})
	}
	return ctx
}

func (*rawRanges) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// counted returns the ranges countRaw counted, in order, and fails unless each of its
// queries counted the same ones.
func (rr *rawRanges) counted(t *testing.T) []recon.Window {
	t.Helper()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var first []recon.Window
	for _, ws := range rr.ranges {
		sort.Slice(ws, func(i, j int) bool { return ws[i].From.Before(ws[j].From) })
		if first == nil {
			first = ws
		} else if len(ws) != len(first) {
			t.Fatalf("countRaw's queries counted %d and %d ranges", len(first), len(ws))
		}
	}
	if n := len(rr.ranges); first != nil && n != len(rollupstore.CountRawSQL) {
		t.Fatalf("%d of countRaw's %d queries ran", n, len(rollupstore.CountRawSQL))
	}
	return first
}

// tracedStore is a store on a pool of db's that records the raw ranges it counts.
func tracedStore(t *testing.T, db *pg.DB) (*rollupstore.Store, *rawRanges) {
	t.Helper()
	rr := &rawRanges{ranges: map[string][]recon.Window{}}
	cfg := db.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = rr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return rollupstore.New(&pg.DB{Pool: pool}), rr
}

// minuteOps writes an operation every 61 seconds from a day before now to 24 minutes after.
func minuteOps(t *testing.T, db *pg.DB, now time.Time) {
	t.Helper()
	ctx := context.Background()
	var tenant int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency,
	status, created_at, updated_at, closed_at)
SELECT gen_random_uuid(), $1, 'refund', 'stripe', 'k' || i, 'k' || i, 'fp', 100, 'usd', 'succeeded',
	$2::timestamptz + i * interval '61 seconds', $2::timestamptz + i * interval '61 seconds', $2::timestamptz + i * interval '61 seconds'
FROM generate_series(0, 1440) i`, tenant, now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// One pass of the alert evaluator over the default rules' five windows (5m, 30m, 1h, 6h,
// 24h, all ending now) counts each range of raw rows once: the rows after the rollups' cut,
// which every window reads, once for all five, and the partial minute at each window's
// start once, six ranges that do not overlap; asked one window at a time, the tail was
// counted five times. The rollup rows of all five are read by one query, and each window's
// counts are those WindowCounts gives it alone.
func TestWindowCountsAllCountsEachRawRangeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Date(2026, 11, 29, 12, 7, 0, 0, time.UTC)
	minuteOps(t, db, now)
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: ops.NewManualClock(now)}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("rollups: %+v %v", rep, err)
	}
	to := now.Add(41*time.Second + 300*time.Millisecond)
	var ws []recon.Window
	for _, d := range []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
		ws = append(ws, recon.Window{From: to.Add(-d), To: to})
	}

	store, rr := tracedStore(t, db)
	got, err := store.WindowCountsAll(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	counted := rr.counted(t)
	t.Logf("one pass counted %d raw ranges in %d statements: %v", len(counted), rr.stmts, counted)
	for i := 1; i < len(counted); i++ {
		if counted[i].From.Before(counted[i-1].To) {
			t.Fatalf("raw ranges %v and %v overlap: their rows were counted twice", counted[i-1], counted[i])
		}
	}
	// The five partial minutes at the windows' starts, and the tail after the cut.
	if len(counted) != len(ws)+1 {
		t.Fatalf("%d raw ranges counted (%v), want %d: each window's partial first minute and the shared tail", len(counted), counted, len(ws)+1)
	}
	// BEGIN, JIT off, the state, one statement per raw range, the rollups of all windows,
	// ROLLBACK.
	if want := 1 + 1 + 1 + len(counted) + 1 + 1; rr.stmts > want {
		t.Fatalf("%d statements, want at most %d", rr.stmts, want)
	}
	alone, ra := tracedStore(t, db)
	for i, w := range ws {
		one, err := alone.WindowCounts(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := rollupstore.New(db).RawWindowCounts(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], one) || !reflect.DeepEqual(got[i], raw) {
			t.Fatalf("%s window:\n all %+v\n one %+v\n raw %+v", w.To.Sub(w.From), got[i], one, raw)
		}
	}
	t.Logf("one window at a time: %d raw ranges in %d statements", len(ra.counted(t)), ra.stmts)

	// With the job taken for down every window is raw: the five nested windows are cut
	// into five pieces, each counted once, not 24h+6h+1h+30m+5m of rows.
	stale := to.Add(rollupstore.RollupStaleAfter + time.Second)
	for i := range ws {
		ws[i] = recon.Window{From: stale.Add(-ws[i].To.Sub(ws[i].From)), To: stale}
	}
	store, rr = tracedStore(t, db)
	if got, err = store.WindowCountsAll(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if counted := rr.counted(t); len(counted) != len(ws) || !counted[0].From.Equal(ws[4].From) || !counted[4].To.Equal(stale) {
		t.Fatalf("the job down: raw ranges %v, want the five windows cut where the next one starts", counted)
	}
	for i, w := range ws {
		if raw, err := rollupstore.New(db).RawWindowCounts(ctx, w); err != nil || !reflect.DeepEqual(got[i], raw) {
			t.Fatalf("the job down, %s window:\n all %+v\n raw %+v (%v)", w.To.Sub(w.From), got[i], raw, err)
		}
	}
}
