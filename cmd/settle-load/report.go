package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/settle-dev/settle/ops/pg/localpg"
)

// report is one run's figures, printed as the table docs/benchmarks.md quotes.
type report struct {
	cfg                   config
	driver                *driver
	world                 *world
	check                 *checked
	settled               time.Duration
	fsync                 time.Duration
	loadBefore, loadAfter string
}

// routeOrder is the order of the report's rows.
var routeOrder = []string{"refund", "chat", "chat-stream", "job"}

func (r *report) print(out io.Writer) {
	d := r.driver
	fmt.Fprintf(out, "\nmachine: %d CPUs; load average %s before, %s after; fdatasync of 8 kB %s (pg_test_fsync)\n",
		runtime.NumCPU(), r.loadBefore, r.loadAfter, fsyncText(r.fsync))
	for _, e := range d.events {
		fmt.Fprintln(out, e)
	}
	fmt.Fprintf(out, "offered %.0f req/s for %s over %d tenants (seed %d, faults %v): %d intents %v; %d not sent (generator at %d in flight)\n",
		r.cfg.rate, r.cfg.duration, r.cfg.tenants, r.cfg.seed, r.cfg.faults, sum(d.intents), d.intents, d.notSent, maxInFlight)
	fmt.Fprintf(out, "achieved: %.1f req/s (%d requests started within the %s; last answer %.1fs after its end)\n\n",
		float64(d.inWindow)/r.cfg.duration.Seconds(), d.inWindow, r.cfg.duration, d.end.Sub(d.start.Add(r.cfg.duration)).Seconds())
	r.printRoutes(out)
	fmt.Fprintf(out, "\naround the kill (from 1 s before it to 2 s after the restart): %s\n", classLine(d.aroundKill))
	fmt.Fprintf(out, "refund answers (200): %v\n", d.refundAns)
	if len(d.otherOp) > 0 {
		fmt.Fprintf(out, "intents answered from more than one operation or job: %d (%s)\n", len(d.otherOp), strings.Join(first(d.otherOp, 5), ", "))
	}
	fmt.Fprintf(out, "\npeak RSS (VmHWM), goal ≤ 150 MB:")
	for _, rp := range r.world.all {
		note := ""
		if rp.killed.Load() {
			note = ", killed"
		}
		fmt.Fprintf(out, " %s %.1f MB%s;", rp.name, float64(rp.peakKB.Load())/1024, note)
	}
	c := r.check
	fmt.Fprintf(out, "\nledger after settling %.1fs: operations %v, jobs %v\n", r.settled.Seconds(), c.opsByStatus, c.jobsByStatus)
	fmt.Fprintf(out, "providers: %d refunds at Stripe, %d generations at the LLM (%d billed again after an uncertain attempt); reconciler's double_charge exceptions: %d\n",
		c.refundsAtStripe, c.generations, c.possibleDuplicates, c.reconDoubles)
	fmt.Fprintf(out, "\noperations lost: %d (must be 0)\n", c.lost())
	printWhy(out, c.lostWhy)
	fmt.Fprintf(out, "double charges:  %d (must be 0)\n", c.doubles())
	printWhy(out, c.doubleWhy)
	fmt.Fprintf(out, "replicas' logs: %s\n", r.world.runDir)
}

func (r *report) printRoutes(out io.Writer) {
	fmt.Fprintf(out, "%-12s %8s %8s %8s %8s  %s\n", "route", "requests", "p50 ms", "p99 ms", "max ms", "answers by class")
	all := &routeStats{classes: map[string]int{}}
	for _, name := range routeOrder {
		s := r.driver.routes[name]
		if s == nil {
			continue
		}
		printRoute(out, name, s)
		all.latencies = append(all.latencies, s.latencies...)
		for k, v := range s.classes {
			all.classes[k] += v
		}
	}
	printRoute(out, "all", all)
}

func printRoute(out io.Writer, name string, s *routeStats) {
	slices.Sort(s.latencies)
	fmt.Fprintf(out, "%-12s %8d %8s %8s %8s  %s\n", name, sum(s.classes), ms(quantile(s.latencies, 0.5)),
		ms(quantile(s.latencies, 0.99)), ms(quantile(s.latencies, 1)), classLine(s.classes))
}

// quantile returns the q-quantile of sorted latencies by nearest rank; 0 for none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64)
}

func classLine(m map[string]int) string {
	var parts []string
	for _, c := range classes {
		if m[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, m[c]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func printWhy(out io.Writer, why map[string][]string) {
	for _, k := range sortedKeys(why) {
		fmt.Fprintf(out, "  %s: %d, e.g. %s\n", k, len(why[k]), strings.Join(first(why[k], 3), "; "))
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func fsyncText(d time.Duration) string {
	if d == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%d µs", d.Microseconds())
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// fdatasyncCost runs PostgreSQL's pg_test_fsync in dir (the cluster's folder, the disk of
// its WAL) and returns its figure for fdatasync after one 8 kB write: what one durable
// commit waits for. The tool is stopped once that line is out; 0 when it cannot be had.
func fdatasyncCost(dir string) time.Duration {
	bin, err := localpg.FindBin()
	if err != nil {
		return 0
	}
	if initdb, err := filepath.EvalSymlinks(filepath.Join(bin, "initdb")); err == nil {
		bin = filepath.Dir(initdb)
	}
	file := filepath.Join(dir, "pg_test_fsync.tmp")
	defer os.Remove(file)
	cmd := exec.Command(filepath.Join(bin, "pg_test_fsync"), "-s", "2", "-f", file)
	out, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		return 0
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it removes its file on SIGTERM
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(out)
	section := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if strings.Contains(sc.Text(), "using one 8kB write") {
			section = true
		} else if section && len(f) == 5 && f[0] == "fdatasync" && f[2] == "ops/sec" {
			if perSec, err := strconv.ParseFloat(f[1], 64); err == nil && perSec > 0 {
				return time.Duration(float64(time.Second) / perSec)
			}
			return 0
		}
	}
	return 0
}
