package rollupstore_test

import (
	"context"
	"math/rand/v2"
	"reflect"
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

// timedCount is one countRaw statement a traced pool ran: its range and when it ran.
type timedCount struct {
	recon.Window
	start, end time.Time
}

// countTimes records the countRaw statements of a pool with their times.
type countTimes struct {
	mu     sync.Mutex
	counts []timedCount
}

func (c *countTimes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !rollupstore.CountRawSQL[d.SQL] || len(d.Args) != 1 {
		return ctx
	}
	a, ok := d.Args[0].(pgx.NamedArgs)
	if !ok {
		return ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = append(c.counts, timedCount{Window: recon.Window{From: a["from"].(time.Time), To: a["to"].(time.Time)}, start: time.Now()})
	return ctx
}

func (c *countTimes) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.counts); n > 0 && c.counts[n-1].end.IsZero() {
		c.counts[n-1].end = time.Now()
	}
}

// take returns the statements recorded since the last take.
func (c *countTimes) take() []timedCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = nil
	return out
}

// timedStore is a store on a pool of db's that records its countRaw statements' times.
func timedStore(t *testing.T, db *pg.DB) (*rollupstore.Store, *countTimes) {
	t.Helper()
	ct := &countTimes{}
	cfg := db.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = ct
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return rollupstore.New(&pg.DB{Pool: pool}), ct
}

// checkPaced fails unless counts cover w in order, without gap or overlap, each within one
// minute when w spans at most eight, and each after a rest of at least pause since the
// previous one ended.
func checkPaced(t *testing.T, what string, counts []timedCount, w recon.Window, pause time.Duration) {
	t.Helper()
	if len(counts) == 0 || !counts[0].From.Equal(w.From) || !counts[len(counts)-1].To.Equal(w.To) {
		t.Fatalf("%s: counted %v, want pieces of %v", what, counts, w)
	}
	for i, c := range counts {
		if w.To.Sub(w.From) <= 8*time.Minute && c.To.Sub(c.From.Truncate(time.Minute)) > time.Minute {
			t.Errorf("%s: piece %v spans more than its minute", what, c.Window)
		}
		if i == 0 {
			continue
		}
		if !c.From.Equal(counts[i-1].To) {
			t.Errorf("%s: piece %v does not start where %v ended", what, c.Window, counts[i-1].Window)
		}
		if rest := c.start.Sub(counts[i-1].end); rest < pause {
			t.Errorf("%s: piece %v began %v after the previous one ended, want a rest of %v", what, c.Window, rest, pause)
		}
	}
}

// A background count of several minutes of raw rows (the alert evaluator's, the rollup
// job's) is one statement per minute with a rest between, and its numbers are those of the
// unpaced count of the same window (ops rule 8: the rates are counted facts, however they
// are read). A window of a day counted raw (the rollup job down) is cut into a few runs of
// minutes, not 1,440.
func TestPacedCountsRestBetweenMinutesAndAddUpToTheWholeCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db := pgtest.New(t)
	s := seed(t, db, rand.New(rand.NewPCG(8, 81)), end)
	whole := rollupstore.New(db)
	store, times := timedStore(t, db)
	const pause = 30 * time.Millisecond
	paced := store.Paced(pause)

	// Windows around the seeded operations, off the minute at both ends, each holding an
	// operation with its requests, attempts and charges placed around it.
	for i, o := range s.ops[:12] {
		w := recon.Window{From: o.created.Add(-150*time.Second - 7*time.Second), To: o.created.Add(130*time.Second + 3*time.Second)}
		want, err := whole.RawWindowCounts(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		times.take()
		got, err := paced.RawWindowCounts(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("window %d %v paced:\n got %+v\nwhole %+v", i, w, got, want)
		}
		counts := times.take()
		checkPaced(t, "a window of minutes", counts, w, pause)
		if len(counts) < 5 {
			t.Errorf("window %v counted in %d statements, want one per minute", w, len(counts))
		}
	}

	day := recon.Window{From: end.Add(-24*time.Hour - 11*time.Second), To: end}
	want, err := whole.RawWindowCounts(ctx, day)
	if err != nil {
		t.Fatal(err)
	}
	got, err := paced.RawWindowCounts(ctx, day)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a day paced:\n got %+v\nwhole %+v", got, want)
	}
	counts := times.take()
	checkPaced(t, "a day", counts, day, pause)
	if len(counts) > 10 {
		t.Errorf("a day's raw rows counted in %d statements, want a few runs of minutes", len(counts))
	}
}

// A paced pass of the rollup job (the server's) counts its fresh window a minute at a time,
// resting after its changed-minutes search and between minutes, and writes the rollups an
// unpaced pass writes: the windows read from them equal the raw counts.
func TestAPacedRollupPassCountsAMinuteAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db := pgtest.New(t)
	seed(t, db, rand.New(rand.NewPCG(9, 91)), end)
	store, times := timedStore(t, db)
	const pause = 30 * time.Millisecond
	clock := ops.NewManualClock(end.Add(-20 * time.Second))
	roll := &recon.Rollups{Store: store.Paced(pause), Clock: clock, MaxSpan: 80 * time.Hour}
	if rep, err := roll.CatchUp(ctx); err != nil || !rep.CaughtUp {
		t.Fatalf("catch up: %+v %v", rep, err)
	}
	times.take()
	clock.Advance(15 * time.Second)
	rep, err := roll.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := times.take()
	fresh := recon.Window{From: rep.From, To: rep.To}
	if fresh.To.Sub(fresh.From) < 2*time.Minute {
		t.Fatalf("the pass's fresh window %v, want at least two minutes (the overlap's)", fresh)
	}
	checkPaced(t, "the pass's fresh window", counts[:int(fresh.To.Sub(fresh.From)/time.Minute)], fresh, pause)
	for _, d := range []time.Duration{5 * time.Minute, time.Hour, 24 * time.Hour} {
		w := recon.Window{From: clock.Now().Add(-d), To: clock.Now()}
		got, err := rollupstore.New(db).WindowCounts(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		want, err := rollupstore.New(db).RawWindowCounts(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s window after paced passes:\n got %+v\n raw %+v", d, got, want)
		}
	}
}
