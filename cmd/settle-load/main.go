// Command settle-load is Settle's load run: it starts a private, durable Postgres, the fake
// Stripe and the fake LLM with a mix of faults, and two `settle serve` processes, then drives
// mixed traffic at a chosen rate through real HTTP for a chosen time (refunds, chat
// completions streamed and not, pipeline jobs; duplicates, double clicks, retries, requests
// that must be refused), kills one replica with SIGKILL partway and starts it again, waits
// for the ledger to settle, and prints what held: requests per second, p50 and p99 per
// route, answers by class, peak RSS per replica, operations lost and double charges.
//
// It exits 1 when an operation was lost or a charge was made twice, 2 when the run itself
// could not be made. It is no part of the product binary; `make load` builds both and runs
// it:
//
//	make load RATE=100 DURATION=60s
//
// `settle-load gateway` is the gateway benchmark instead (gateway.go): calls of each API the
// gateway serves (chat completions, Responses, Anthropic's Messages, embeddings) at fixed
// rates sent to the fake provider directly, through a bare reverse proxy and through Settle,
// in turn, and what each adds; `make bench-gateway` runs it:
//
//	make bench-gateway RATES=100,300,500 DURATION=60s APIS=chat,responses,messages,embeddings
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// config is what one run does.
type config struct {
	rate         float64       // requests per second offered, on average
	duration     time.Duration // how long traffic is offered
	killAt       float64       // when replica2 is killed, as a fraction of duration
	restartAfter time.Duration // how long after the kill it starts again; 0 never
	settleBin    string        // the settle binary under test
	dir          string        // where the run keeps its cluster and the replicas' logs
	seed         uint64        // seeds the traffic mix and the fakes' faults
	settleWithin time.Duration // how long to wait for the ledger to settle after traffic
	hold         bool          // keep everything running after the report, until Ctrl-C
	tenants      int           // how many tenants the traffic is spread over
	faults       bool          // whether the fakes inject their fault mix
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "gateway":
			os.Exit(gatewayMain(os.Args[2:]))
		case "reverse-proxy":
			os.Exit(reverseProxyMain(os.Args[2:]))
		}
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "settle-load:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, err := run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "settle-load:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("settle-load", flag.ContinueOnError)
	var c config
	fs.Float64Var(&c.rate, "rate", envFloat("RATE", 50), "requests per second offered (env RATE)")
	fs.DurationVar(&c.duration, "duration", envDuration("DURATION", 60*time.Second), "how long traffic is offered (env DURATION)")
	fs.Float64Var(&c.killAt, "kill-at", 0.4, "when replica2 is killed with SIGKILL, as a fraction of the duration (0 never)")
	fs.DurationVar(&c.restartAfter, "restart-after", 5*time.Second, "how long after the kill replica2 starts again (0 never)")
	fs.StringVar(&c.settleBin, "settle", "bin/settle", "the settle binary to run as replicas")
	fs.StringVar(&c.dir, "dir", ".settle", "folder under which the run keeps its cluster and the replicas' logs")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the traffic mix and the fakes' faults")
	fs.DurationVar(&c.settleWithin, "settle-within", 90*time.Second, "how long to wait for the ledger to settle after the traffic")
	fs.IntVar(&c.tenants, "tenants", 4, "how many tenants the traffic is spread over (each has its own share of Stripe reads)")
	fs.BoolVar(&c.faults, "faults", true, "inject the fakes' fault mix; without it p99 measures capacity, not the faults' own delays")
	fs.BoolVar(&c.hold, "hold", false, "keep the database, the fakes and the replicas running after the report until Ctrl-C, to look into them")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.rate <= 0 || c.duration <= 0 || c.tenants <= 0 {
		return c, fmt.Errorf("-rate, -duration and -tenants must be positive")
	}
	bin, err := filepath.Abs(c.settleBin)
	if err != nil {
		return c, err
	}
	c.settleBin = bin
	return c, nil
}

func envFloat(key string, def float64) float64 {
	var v float64
	if _, err := fmt.Sscan(os.Getenv(key), &v); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(key)); err == nil && d > 0 {
		return d
	}
	return def
}

// run makes one load run and prints its report to out. Everything it starts is stopped
// before it returns, also when ctx ends early (Ctrl-C).
func run(ctx context.Context, cfg config, out io.Writer) (int, error) {
	before := loadAverage()
	w, err := startWorld(ctx, cfg, out)
	if err != nil {
		return 0, err
	}
	defer w.close()
	fsync := fdatasyncCost(w.cluster.Dir)
	fmt.Fprintf(out, "driving %.0f req/s for %s against %s and %s\n", cfg.rate, cfg.duration, w.slots[0].addr, w.slots[1].addr)
	d := newDriver(w, cfg)
	d.drive(ctx)
	if ctx.Err() != nil {
		return 0, fmt.Errorf("interrupted")
	}
	settled := w.waitSettled(ctx, cfg.settleWithin)
	res, err := check(ctx, w, d)
	if err != nil {
		return 0, err
	}
	rep := report{cfg: cfg, driver: d, world: w, check: res, settled: settled, fsync: fsync,
		loadBefore: before, loadAfter: loadAverage()}
	rep.print(out)
	if cfg.hold {
		fmt.Fprintf(out, "holding until Ctrl-C: DATABASE_URL=%s, tokens %s\n", w.url, strings.Join(w.tokens, " "))
		<-ctx.Done()
	}
	if res.lost() > 0 || res.doubles() > 0 {
		return 1, nil
	}
	return 0, nil
}
