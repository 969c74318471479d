package alertstore_test

import (
	"context"
	"sort"
	"sync"
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

// rangeReads records the statements a pool runs and, for each text, the [@from, @to) of
// every run that names one.
type rangeReads struct {
	mu     sync.Mutex
	stmts  int
	ranges map[string][]recon.Window
}

func (rr *rangeReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.stmts++
	if len(d.Args) == 1 {
		a, _ := d.Args[0].(pgx.NamedArgs)
		from, ok1 := a["from"].(time.Time)
		to, ok2 := a["to"].(time.Time)
		if ok1 && ok2 {
			rr.ranges[d.SQL] = append(rr.ranges[d.SQL], recon.Window{From: from, To: to})
		}
	}
	return ctx
}

func (*rangeReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// One pass of the evaluator over the default rules (windows of 5m, 30m, 1h, 6h and 24h,
// all ending now) reads each range of the ledger's rows once: no statement runs twice over
// ranges that overlap. One window at a time, the rows after the rollups' cut were counted
// five times by each of countRaw's four queries, and the possible duplicates of the last
// five minutes five times too.
func TestAnAlertPassReadsEachRangeOfRowsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := t0
	ledgerRows(t, f, "old", 600, now.Add(-23*time.Hour), now.Add(-time.Minute))
	if rep, err := (&recon.Rollups{Store: rollupstore.New(f.DB), Clock: ops.NewManualClock(now)}).CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("rollups: %+v %v", rep, err)
	}
	ledgerRows(t, f, "new", 75, now.Add(time.Second), now.Add(40*time.Second))
	// Possible duplicates that finished over the day, some in the last minute.
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE attempts SET possible_duplicate = true, finished_at = started_at + interval '3 seconds'
WHERE operation_id IN (SELECT id FROM operations WHERE amount_cents % 7 = 0)`); err != nil {
		t.Fatal(err)
	}

	rr := &rangeReads{ranges: map[string][]recon.Window{}}
	cfg := f.DB.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = rr
	cfg.MaxConns, cfg.MinConns = 1, 0 // for rowsReader's exact counts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := alertstore.New(&pg.DB{Pool: pool})
	at := now.Add(41*time.Second + 300*time.Millisecond)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: store, Store: store, Clock: ops.NewManualClock(at)}
	ledger := &rowsReader{store: store, pool: pool}
	before := ledger.total(t)
	rr.stmts = 0
	res, err := ev.RunOnce(ctx)
	if err != nil || res.Errors > 0 {
		t.Fatalf("pass %+v: %v", res, err)
	}
	stmts := rr.stmts
	read := ledger.total(t) - before
	reads := 0
	for sql, ws := range rr.ranges {
		reads += len(ws)
		sort.Slice(ws, func(i, j int) bool { return ws[i].From.Before(ws[j].From) })
		overlaps := 0
		for i := 1; i < len(ws); i++ {
			if ws[i].From.Before(ws[i-1].To) {
				overlaps++
			}
		}
		if overlaps > 0 {
			t.Errorf("one pass ran a statement over %d ranges, %d of them overlapping the one before: %v\n%.300s", len(ws), overlaps, ws, sql)
		}
	}
	t.Logf("one pass of the default rules: %d statements, %d of them over a range of rows, %d rows of the ledger read", stmts, reads, read)
	// The same windows one at a time, as the pass read them before.
	var alone int64
	for _, w := range []struct{ d, back time.Duration }{{5 * time.Minute, 0}, {30 * time.Minute, 0}, {time.Hour, 0},
		{6 * time.Hour, 0}, {24 * time.Hour, 0}, {time.Hour, time.Hour}} {
		_, n := ledger.counters(t, at.Add(-w.back-w.d), at.Add(-w.back))
		alone += n
	}
	t.Logf("its windows one at a time: %d rows of the ledger read", alone)
	if read >= alone {
		t.Fatalf("the pass read %d rows of the ledger, its windows one at a time %d", read, alone)
	}
	sameWindowsAsRaw(t, f, store, at)
}

// sameWindowsAsRaw checks that the default rules' windows at now, read together, count what
// each counts alone from the raw rows, and the possible duplicates that finished in each.
func sameWindowsAsRaw(t *testing.T, f *fixture, store *alertstore.Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	var ws []alerts.Window
	for _, d := range []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
		ws = append(ws, alerts.Window{From: now.Add(-d), To: now}, alerts.Window{From: now.Add(-2 * d), To: now.Add(-d)})
	}
	all, err := store.CountersAll(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		sig := sameAsRaw(t, f, all[i], w.From, w.To)
		var want int64
		if err := f.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts WHERE possible_duplicate AND finished_at >= $1 AND finished_at < $2`,
			w.From, w.To).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := sig["acme/refund/stripe/ "+string(alerts.PossibleDuplicates)]; got != float64(want) {
			t.Fatalf("[%s, %s): %v possible duplicates, want %d", w.From, w.To, got, want)
		}
	}
}
