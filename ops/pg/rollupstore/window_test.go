package rollupstore_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// WindowCounts gives the raw rows' counts for windows of every length the alert rules use
// and beyond, on whole minutes or not, asked one at a time or all at once (WindowCountsAll,
// whose windows share raw ranges and rollup reads), over a random workload whose minute rows are partly
// pruned (the minutes before minutes_from are counted raw, the hours and quarter hours
// there read from the rollups), before and after old operations change and the job's next
// pass runs.
func TestWindowCountsEqualTheRawCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db := pgtest.New(t)
	rnd := rand.New(rand.NewPCG(7, 71))
	s := seed(t, db, rnd, end)
	clock := ops.NewManualClock(end.Add(7*time.Hour + 23*time.Second))
	roll := &recon.Rollups{Store: rollupstore.New(db), Clock: clock, MaxSpan: 7 * time.Hour, MinuteKeep: 48 * time.Hour}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp || rep.Pruned == 0 {
		t.Fatalf("catch up: %+v %v", rep, err)
	}
	st, err := rollupstore.New(db).RollupStatus(ctx)
	if err != nil || st.MinutesFrom.IsZero() {
		t.Fatalf("state %+v %v, want minute rows pruned", st, err)
	}
	store := rollupstore.New(db)
	check := func(stage string) {
		t.Helper()
		to := clock.Now().Add(17 * time.Second)
		lengths := []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour,
			80*time.Hour + 13*time.Minute + 7*time.Second, 93 * 24 * time.Hour}
		// Windows starting half a minute before an operation of a pruned hour: its minutes
		// up to the next quarter hour are counted raw.
		for _, o := range s.ops {
			if o.created.Before(st.MinutesFrom) && len(lengths) < 17 {
				lengths = append(lengths, to.Sub(o.created.Add(-30*time.Second)))
			}
		}
		var ws []recon.Window
		for _, d := range lengths {
			ws = append(ws, recon.Window{From: to.Add(-d), To: to})
		}
		all, err := store.WindowCountsAll(ctx, ws)
		if err != nil {
			t.Fatalf("%s: all windows: %v", stage, err)
		}
		for i, w := range ws {
			got, err := store.WindowCounts(ctx, w)
			if err != nil {
				t.Fatalf("%s: %s window: %v", stage, lengths[i], err)
			}
			want, err := store.RawWindowCounts(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s window:\n got %+v\nraw %+v", stage, lengths[i], got, want)
			}
			if !reflect.DeepEqual(all[i], want) {
				t.Fatalf("%s: %s window read with the others:\n got %+v\nraw %+v", stage, lengths[i], all[i], want)
			}
		}
	}
	check("caught up")
	lastRun := clock.Now()
	clock.Advance(10 * time.Second)
	mutate(t, db, rnd, s, end, lastRun, clock.Now())
	clock.Advance(5 * time.Second)
	if _, err := roll.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	check("after old rows changed and the next pass")
}

// A day's window reads the rollups through their primary key, range by range: 23 hours, a
// few quarter hours and minutes per group, not the minute rows of the day (nor the table).
// Counted on the table's statistics, flushed by the one connection the store runs on.
func TestADaysWindowReadsTheRollupsByLevel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Date(2026, 11, 29, 12, 7, 0, 0, time.UTC)
	const groups = 15
	for _, width := range []int{60, 900, 3600} {
		if _, err := db.Pool.Exec(ctx, `
INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, client_requests, operations, succeeded, failed,
	attempts, attempts_sent, charges, computed_at)
SELECT $1, s, g % 5 + 1, (ARRAY['refund', 'llm_call', 'llm_job'])[g % 3 + 1], 'p' || g, 1, 1, 1, 0, 1, 1, 1, $2
FROM generate_series($2::timestamptz - interval '3 days', $2::timestamptz - make_interval(secs => $1), make_interval(secs => $1)) s,
	generate_series(0, $3 - 1) g`, width, now.Truncate(time.Hour), groups); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE rollups`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO rollup_state (name, minutes_until, changes_until, last_run_at) VALUES ('rollups', $1, $1, $1)`, now); err != nil {
		t.Fatal(err)
	}
	cfg := db.Pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	read := func() int64 {
		t.Helper()
		var n int64
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT (SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relname = 'rollups')
	+ (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = 'rollups')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	to := now.Add(20 * time.Second)
	before := read()
	rows, err := rollupstore.New(&pg.DB{Pool: pool}).WindowCounts(ctx, recon.Window{From: to.Add(-24 * time.Hour), To: to})
	if err != nil {
		t.Fatal(err)
	}
	n := read() - before
	// 12:07:20 back to 12:07:20: the minutes 12:08-12:15, the quarters to 13:00, the hours
	// to 12:00 of the next day (the table ends there); each row of every level says 1.
	var ops int64
	for _, r := range rows {
		ops += r.Operations
	}
	if want := int64(groups * (7 + 3 + 23)); ops != want {
		t.Fatalf("%d operations counted, want %d", ops, want)
	}
	t.Logf("a day's window read %d tuples of rollups (%d rows)", n, 3*24*groups*(60+4+1))
	if perGroup := n / groups; perGroup > 2*(7+3+23) {
		t.Fatalf("a day's window read %d tuples of rollups, want 33 rows a group (7 minutes, 3 quarters, 23 hours) and their index entries", n)
	}
}
