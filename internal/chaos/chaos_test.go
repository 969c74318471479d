package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestMain(m *testing.M) { testworld.Main(m) }

// The clock of a lane's first seed, and how far back each next seed of the lane starts.
// A seed's clock moves forward by less than three days (two retention jumps and some
// leases), so every seed of a lane lives before everything the seeds before it wrote: the
// reaper's and the workers' claims, which are global by design, never reach a row of an
// earlier seed.
var laneStart = time.Date(2060, 1, 1, 9, 0, 0, 0, time.UTC)

const laneSpan = 7 * 24 * time.Hour

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive whole number", name, v)
	}
	return n, nil
}

// seeds are the seeds to run: SETTLE_CHAOS_SEED alone, or 1 to SETTLE_CHAOS_SEEDS (300).
func seeds() ([]uint64, error) {
	if v := os.Getenv("SETTLE_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SETTLE_CHAOS_SEED=%q: want a seed number", v)
		}
		return []uint64{n}, nil
	}
	n, err := envInt("SETTLE_CHAOS_SEEDS", 300)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out, nil
}

// outcome is what one seed came to.
type outcome struct {
	seed  uint64
	fails []string
	sched *schedule
	notes []string
	state string
	took  time.Duration
}

// TestChaos runs the seeds' schedules, several lanes at once, each lane on its own database
// of the one test cluster, and checks the invariants after each. A failing seed prints its
// schedule and how to run it alone.
func TestChaos(t *testing.T) {
	testtool.Heavy(t, "the chaos simulation")
	list, err := seeds()
	if err != nil {
		t.Fatal(err)
	}
	lanes, err := envInt("SETTLE_CHAOS_LANES", 12)
	if err != nil {
		t.Fatal(err)
	}
	lanes = min(lanes, len(list))
	dbs := make([]*pg.DB, lanes)
	for i := range dbs {
		dbs[i] = pgtest.New(t)
	}
	began := time.Now()
	var next atomic.Int64
	var mu sync.Mutex
	var failed []outcome
	var slowest outcome
	var wg sync.WaitGroup
	for _, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := laneStart
			for {
				i := next.Add(1) - 1
				if int(i) >= len(list) {
					return
				}
				o := runSeed(db, list[i], base)
				base = base.Add(-laneSpan)
				mu.Lock()
				if len(o.fails) > 0 {
					failed = append(failed, o)
				}
				if o.took > slowest.took {
					slowest = o
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d seeds in %s on %d lanes; slowest seed %d took %s", len(list), time.Since(began).Round(time.Millisecond), lanes,
		slowest.seed, slowest.took.Round(time.Millisecond))
	for i, o := range failed {
		if i >= 5 {
			// The first ones in full; the rest one line each, to be rerun alone.
			t.Errorf("chaos seed %d failed: %s (make chaos SEED=%d)", o.seed, o.fails[0], o.seed)
			continue
		}
		t.Errorf("chaos seed %d failed:\n  %s\nschedule:\n%swhat happened:\n  %s\nend state (times from the seed's start):\n%srun it alone: make chaos SEED=%d",
			o.seed, strings.Join(o.fails, "\n  "), o.sched, strings.Join(o.notes, "\n  "), o.state, o.seed)
	}
	if len(failed) > 0 {
		seeds := make([]string, len(failed))
		for i, o := range failed {
			seeds[i] = strconv.FormatUint(o.seed, 10)
		}
		t.Errorf("failing seeds: %s", strings.Join(seeds, " "))
	}
}

// runSeed draws a seed's schedule, runs it from base and checks the invariants.
func runSeed(db *pg.DB, seed uint64, base time.Time) outcome {
	began := time.Now()
	o := outcome{seed: seed, sched: draw(seed)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := start(ctx, db, o.sched, base)
	if err != nil {
		o.fails = []string{"start: " + err.Error()}
		return o
	}
	defer r.close()
	if err := r.run(ctx); err != nil {
		o.fails = append(o.fails, "run: "+err.Error())
	}
	fails, err := r.check(ctx)
	if err != nil {
		fails = append(fails, "check: "+err.Error())
	}
	o.fails = append(o.fails, fails...)
	if len(o.fails) > 0 {
		o.state = r.dump(ctx, base)
	}
	r.mu.Lock()
	o.notes = r.notes
	r.mu.Unlock()
	o.took = time.Since(began)
	return o
}

// timeUnits turns a count into a multiplier of a duration.
func timeUnits(i int) time.Duration { return time.Duration(i) }
