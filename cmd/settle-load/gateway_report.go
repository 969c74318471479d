package main

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The targets set for Settle's added latency and memory, printed beside the figures.
const (
	target300P50 = 3250 * time.Microsecond
	target300P99 = 13 * time.Millisecond
	target500P99 = 40 * time.Millisecond
	targetRSSMB  = 150
)

// machine is what the report says of the host the run shared: its load, what a durable
// commit waits for, and what a hand-off between two processes costs, measured before the run.
type machine struct {
	loadBefore, loadAfter string
	fsync, rt50, rt99     time.Duration
}

// printGateway prints the benchmark's table: per rate and API, the fake's own latency, then
// what the proxy and Settle add to it (a quantile of theirs minus the same quantile of the
// fake's), their failures, CPU per request and peak RSS.
func printGateway(out io.Writer, cfg gatewayConfig, phases []*phase, m machine) {
	fmt.Fprintf(out, "\ngateway benchmark: %s per rate, API and target, in turn direct, proxy, settle on each API at each rate; the fakes answer after %s, "+
		"a stream in %d content chunks %s apart; half the requests stream (none on embeddings)\n",
		cfg.duration, cfg.ttft, cfg.chunks, cfg.chunkDelay)
	fmt.Fprintf(out, "settle: %s with production's defaults (SETTLE_LLM_STORE=auto: it asks the fake to store its completions), one tenant\n", cfg.settleBin)
	fmt.Fprintf(out, "machine: %d CPUs; load average %s before, %s after; fdatasync of 8 kB %s (pg_test_fsync); a SELECT 1 round trip %s (one client, idle)\n\n",
		runtime.NumCPU(), m.loadBefore, m.loadAfter, fsyncText(m.fsync), roundTripText(m.rt50, m.rt99))
	fmt.Fprintf(out, "%-6s %-10s %-7s %7s  %-24s  %-24s  %-10s %9s %10s %11s %9s %7s %9s %8s %7s\n", "rate", "api", "target", "sent",
		"whole answer p50/p95/p99", "first chunk p50/p95/p99", "failed", "CPU/req", "pg CPU/req", "load CPU/req", "wait/req", "WAL/req", "peak RSS", "late p99", "CPU PSI")
	byRate := map[float64]map[string]*phase{}
	for _, p := range phases {
		if byRate[p.rate] == nil {
			byRate[p.rate] = map[string]*phase{}
		}
		byRate[p.rate][p.api.name+" "+p.target.name] = p
	}
	for _, rate := range cfg.rates {
		for ai, api := range cfg.apis {
			base := byRate[rate][api.name+" direct"]
			for _, name := range []string{"direct", "proxy", "settle"} {
				p := byRate[rate][api.name+" "+name]
				if p == nil || base == nil {
					continue
				}
				rateLabel, apiLabel := "", ""
				if name == "direct" {
					apiLabel = api.name
					if ai == 0 {
						rateLabel = fmt.Sprintf("%.0f/s", rate)
					}
				}
				printGatewayRow(out, rateLabel, apiLabel, name, p, base)
			}
		}
	}
	fmt.Fprintf(out, "\ndirect: milliseconds; proxy and settle: milliseconds added to direct's at the same quantile and rate.\n")
	fmt.Fprintf(out, "CPU/req: the server process's utime+stime over the phase, background work included, per request; pg CPU/req: the same\n"+
		"of all Postgres processes (beside direct and proxy, Settle's idle background work); load CPU/req: the same of the\n"+
		"benchmark's own process, the load generator and the fakes, which share the CPUs; wait/req: how long the server's\n"+
		"threads waited, ready to run, for a CPU (schedstat), per request; WAL/req: WAL flushes to disk\n"+
		"(pg_stat_wal.wal_sync) per request, concurrent commits sharing one; peak RSS: VmHWM so far.\n")
	fmt.Fprintf(out, "late p99: how late the generator sent its requests against the schedule (its own health); CPU PSI: share of the\n"+
		"phase during which some task of the machine, ours or another's, waited for a CPU (/proc/pressure/cpu).\n")
	printStatements(out, phases)
	printGatewayTargets(out, cfg.apis, byRate)
}

// printGatewayRow prints one phase's row: its name's target against base, the direct phase of
// the same rate and API.
func printGatewayRow(out io.Writer, rateLabel, apiLabel, name string, p, base *phase) {
	cpu, wait, rss := "-", "-", "-"
	if p.target.proc != nil && p.sent > 0 {
		cpu, wait = perRequest(p.cpu, p.sent), perRequest(p.waited, p.sent)
		rss = fmt.Sprintf("%.1f MB", float64(p.peakRSS)/1024)
	}
	fmt.Fprintf(out, "%-6s %-10s %-7s %7d  %-24s  %-24s  %-10s %9s %10s %11s %9s %7.2f %9s %8s %6.0f%%\n", rateLabel, apiLabel, name, p.sent,
		quantiles(p.plain, base.plain, name == "direct"), quantiles(p.stream, base.stream, name == "direct"),
		failures(p.errors), cpu, perRequest(p.pgCPU, p.sent), perRequest(p.ownCPU, p.sent), wait, float64(p.walSync)/float64(max(p.sent, 1)), rss,
		msText(quantile(p.late, 0.99)), 100*p.starved.Seconds()/p.span.Seconds())
}

// printGatewayTargets says, for the rates the run offered, whether Settle met the targets on
// each API; byRate's phases are named "<api> <target>".
func printGatewayTargets(out io.Writer, apis []*gatewayAPI, byRate map[float64]map[string]*phase) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintln(out, "\ntargets (Settle, the larger of whole answer and first chunk):")
	for _, api := range apis {
		added := func(rate float64, q float64) (time.Duration, bool) {
			d, s := byRate[rate][api.name+" direct"], byRate[rate][api.name+" settle"]
			if d == nil || s == nil {
				return 0, false
			}
			return max(quantile(s.plain, q)-quantile(d.plain, q), quantile(s.stream, q)-quantile(d.stream, q)), true
		}
		if a, ok := added(300, 0.5); ok {
			fmt.Fprintf(out, "  %-10s 300/s added p50 ≤ %s: %s ms, %s\n", api.name, msText(target300P50), msText(a), verdict(a <= target300P50))
			a, _ = added(300, 0.99)
			fmt.Fprintf(out, "  %-10s 300/s added p99 ≤ %s: %s ms, %s\n", api.name, msText(target300P99), msText(a), verdict(a <= target300P99))
		}
		if a, ok := added(500, 0.99); ok {
			failed := sum(byRate[500][api.name+" settle"].errors)
			fmt.Fprintf(out, "  %-10s 500/s no failure: %d failed, %s\n", api.name, failed, verdict(failed == 0))
			fmt.Fprintf(out, "  %-10s 500/s added p99 ≤ %s: %s ms, %s\n", api.name, msText(target500P99), msText(a), verdict(a <= target500P99))
		}
	}
	var peak int64
	for _, ps := range byRate {
		for _, p := range ps {
			if p.target.name == "settle" {
				peak = max(peak, p.peakRSS)
			}
		}
	}
	fmt.Fprintf(out, "  peak RSS ≤ %d MB: %.1f MB, %s\n", targetRSSMB, float64(peak)/1024, verdict(peak <= targetRSSMB*1024))
}

// quantiles is p50/p95/p99 of sorted, or, unless absolute, each minus base's.
func quantiles(sorted, base []time.Duration, absolute bool) string {
	if len(sorted) == 0 {
		return "-"
	}
	var parts []string
	for _, q := range []float64{0.5, 0.95, 0.99} {
		v := quantile(sorted, q)
		if absolute {
			parts = append(parts, msText(v))
			continue
		}
		parts = append(parts, fmt.Sprintf("%+.2f", float64(v-quantile(base, q))/float64(time.Millisecond)))
	}
	return strings.Join(parts, " ")
}

func perRequest(cpu time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f ms", float64(cpu)/float64(n)/float64(time.Millisecond))
}

func msText(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

func failures(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}
