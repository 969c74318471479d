package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// pairedSlices is how many turns each side of a paired run takes. The turns alternate
// settle, dbos, dbos, settle, … so that a drift of the host's load over the run falls on
// both sides alike: measured one after the other for 5 s each, the same two variants gave
// ratios from 1.25 to 1.99 within fifteen minutes of one sitting.
const pairedSlices = 8

// pairedWarmUnits is how many units each side runs, unmeasured, after its pools open.
const pairedWarmUnits = 200

// pairedSide is one side of a paired run: its work, the next unit to run (units are never
// run twice, so the warm-up and every turn admit new intents) and what its turns took.
type pairedSide struct {
	name         string
	work         func(ctx context.Context, i int) error
	next         atomic.Int64
	units        int
	elapsed      time.Duration
	goCPU, pgCPU time.Duration
	// rates is each turn's units per second, in order, so that a side slowed by the turns'
	// starts (a short turn) or by the other side's leftovers shows in the log.
	rates []float64
}

// unit runs the side's next unit; runClients' own index is not used.
func (s *pairedSide) unit(ctx context.Context, _ int) error {
	return s.work(ctx, int(s.next.Add(1)-1))
}

// turn runs n units from the clients and adds what they took to the side, with the
// collection of the garbage they left: both sides share this process's heap, so without it
// the collector would mark and sweep one side's garbage on the other's clock (DBOS allocates
// about three times Settle's bytes per unit). The server's own deferred work is not split so:
// an autovacuum of either side's tables runs in whichever turn it falls.
func (s *pairedSide) turn(b *testing.B, n int) {
	b.Helper()
	goCPU, pgCPU := processCPU(), clusterCPU(b)
	elapsed, err := runClients(n, s.unit)
	if err != nil {
		b.Fatalf("bench: %s: %v", s.name, err)
	}
	start := time.Now()
	runtime.GC()
	elapsed += time.Since(start)
	s.units += n
	s.elapsed += elapsed
	s.rates = append(s.rates, float64(n)/elapsed.Seconds())
	s.goCPU += processCPU() - goCPU
	s.pgCPU += clusterCPU(b) - pgCPU
}

// perSecond is the side's rate over its turns.
func (s *pairedSide) perSecond() float64 { return float64(s.units) / s.elapsed.Seconds() }

// cpuPerUnit is the side's CPU, this process's and the cluster's, per unit.
func (s *pairedSide) cpuPerUnit() time.Duration {
	return (s.goCPU + s.pgCPU) / time.Duration(max(s.units, 1))
}

// pairedRatio is the last paired run's Settle ÷ DBOS, for the summary; 0 when none ran.
var pairedRatio float64

// benchPaired measures Settle's lifecycle and DBOS's workflow in one run, each open on its
// own database at once, in alternating turns of b.N / pairedSlices units per side: the
// ratio of their rates that the host's drift disturbs least. The commits and WAL of each are
// what the settle and dbos variants report; here only rates and CPU.
func benchPaired(b *testing.B) {
	settleWork, settleDone := settleLifecycles(b, database(b, settleDB, true), 2, "")
	defer settleDone()
	dbosWork, dbosDone := dbosWorkflows(b, dbosDatabase(b))
	defer dbosDone()
	settle := &pairedSide{name: "settle", work: settleWork}
	dbos := &pairedSide{name: "dbos", work: dbosWork}
	for _, s := range []*pairedSide{settle, dbos} {
		if !warmed["paired "+s.name] {
			warmUp(b, "paired "+s.name, s.unit)
		}
	}
	// Every run of this function opens new pools, so each side's first units would pay for
	// new connections and their server processes' cold caches (catalog, plans): its first
	// turn ran a third slower than the rest on both sides. A short unmeasured turn each takes
	// that off the measured ones.
	for _, s := range []*pairedSide{settle, dbos} {
		if _, err := runClients(pairedWarmUnits, s.unit); err != nil {
			b.Fatalf("bench: %s: %v", s.name, err)
		}
	}
	runtime.GC() // the warm-ups' garbage is neither side's turn
	b.ResetTimer()
	for i := range pairedSlices {
		n := b.N / pairedSlices
		if i == pairedSlices-1 {
			n = b.N - n*(pairedSlices-1)
		}
		if n == 0 {
			continue
		}
		first, second := settle, dbos
		if i%2 == 1 {
			first, second = dbos, settle
		}
		first.turn(b, n)
		second.turn(b, n)
	}
	b.StopTimer()
	if settle.units == 0 {
		return
	}
	pairedRatio = settle.perSecond() / dbos.perSecond()
	b.Logf("turns of %d units: settle %.0f/s, dbos %.0f/s", b.N/pairedSlices, settle.rates, dbos.rates)
	b.ReportMetric(settle.perSecond(), "settle_lifecycles/s")
	b.ReportMetric(dbos.perSecond(), "dbos_workflows/s")
	b.ReportMetric(pairedRatio, "settle_vs_dbos_x")
	b.ReportMetric(float64(dbos.cpuPerUnit())/float64(settle.cpuPerUnit()), "cpu_dbos_vs_settle_x")
}

// printPaired prints the paired run's figures under the summary, when one ran.
func printPaired() {
	if pairedRatio == 0 {
		return
	}
	fmt.Printf("settle and dbos in %d alternating turns each: Settle ÷ DBOS %.2fx\n\n", pairedSlices, pairedRatio)
}
