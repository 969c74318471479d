package rollupstore_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// WindowCounts gives the raw rows' counts for windows of every length the alert rules use
// and beyond, on whole minutes or not, over a random workload whose minute rows are partly
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
		for _, d := range lengths {
			w := recon.Window{From: to.Add(-d), To: to}
			got, err := store.WindowCounts(ctx, w)
			if err != nil {
				t.Fatalf("%s: %s window: %v", stage, d, err)
			}
			want, err := store.RawWindowCounts(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s window:\n got %+v\nraw %+v", stage, d, got, want)
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
