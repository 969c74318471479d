package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

const (
	demoTenant   = "demo"
	demoPassword = "settle-demo"
)

// demoUsers are the demo's logins, one per role.
var demoUsers = []struct {
	email string
	role  desk.Role
}{
	{"oncall@demo.settle", desk.RoleOncall},
	{"support@demo.settle", desk.RoleSupport},
	{"manager@demo.settle", desk.RoleManager},
	{"admin@demo.settle", desk.RoleAdmin},
}

// demoSetupSteps counts the demo's setup for its progress: the fake Stripe, the fake LLM,
// the database, the program with its migrations, the users, and the tenant and token.
const demoSetupSteps = 6

// demo runs everything on a private, durable Postgres cluster in the project folder, so a
// second run finds the first run's data. The setup's progress goes to stderr, so stdout
// keeps only the banner.
func demo(ctx context.Context, cfg Config, logger *slog.Logger, stdout, stderr io.Writer) error {
	days, err := parseHistoryDays(cfg.DemoHistory)
	if err != nil {
		return err
	}
	// A first run creates a cluster and runs every migration, which takes long enough to
	// look stuck without it.
	setup := newReporter("demo setup", stderr, logger)
	setup.Start(demoSetupSteps, "steps")
	defer setup.Done() // ends the line before an error is printed after it
	// The fakes read the history's simulated clock while it is written, the wall clock after.
	clock := &demoClock{}
	fk, err := startDemoStripe(&cfg, clock)
	if err != nil {
		return err
	}
	defer fk.Close()
	setup.Add(1)
	fl, err := startDemoLLM(&cfg, clock)
	if err != nil {
		return err
	}
	defer fl.Close()
	fa, err := startDemoAnthropic(&cfg, clock)
	if err != nil {
		return err
	}
	defer fa.Close()
	setup.Add(1)
	cluster, err := startDemoDatabase(ctx, &cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logger.Error("stop the demo database", "err", err)
		}
	}()
	setup.Add(1)
	if days > 0 {
		setup.Done()
		f := historyFakes{clock: clock, stripe: fk, stripeBase: cfg.Stripe.APIBase, llm: fl, llmBase: cfg.LLM.BaseURL}
		if err := demoHistory(ctx, cfg, days, f, logger, newReporter("demo history", stderr, logger)); err != nil {
			return err
		}
		setup.Start(demoSetupSteps-3, "steps")
	}

	p := NewProgram(cfg, logger)
	defer p.Close()
	tenant, token, err := runDemoProgram(ctx, p, setup)
	if err != nil {
		return err
	}
	setup.Done()
	traffic := &demoTraffic{p: p, fake: fk, anthropic: fa, tenant: tenant, token: token, log: logger,
		webhookURL: p.URL() + "/webhooks/stripe", backfill: newReporter("demo backfill", stderr, logger)}
	go traffic.run(ctx)
	printDemoBanner(stdout, p.URL(), token, cluster.Dir)
	return p.Wait(ctx)
}

// startDemoDatabase starts the demo's durable cluster in cfg.DemoDir and points cfg at it,
// with migrations on.
func startDemoDatabase(ctx context.Context, cfg *Config) (*localpg.Cluster, error) {
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: cfg.DemoDir, Durable: true})
	if err != nil {
		return nil, fmt.Errorf("start the demo database: %w", err)
	}
	// The cluster is the demo's alone, so its maintenance database holds the tables.
	cfg.DatabaseURL = cluster.URL("postgres")
	cfg.Migrate = true
	return cluster, nil
}

// runDemoProgram runs the program and gives the demo its users, its tenant and a fresh API
// token for it, counting three steps of the setup.
func runDemoProgram(ctx context.Context, p *Program, setup *Reporter) (*ops.Tenant, string, error) {
	if err := p.Run(ctx); err != nil {
		return nil, "", err
	}
	setup.Add(1)
	for _, u := range demoUsers {
		_, err := p.DB.CreateUser(ctx, u.email, demoPassword, u.role)
		if err != nil && ops.ErrorCode(err) != ops.ECONFLICT {
			return nil, "", fmt.Errorf("create demo user %s: %w", u.email, err)
		}
	}
	setup.Add(1)
	// Tokens are kept only as hashes, so each run makes a fresh one to show.
	token, err := ensureToken(ctx, p.DB, demoTenant, "demo")
	if err != nil {
		return nil, "", err
	}
	tenant, err := p.DB.EnsureTenant(ctx, demoTenant)
	if err != nil {
		return nil, "", err
	}
	setup.Add(1)
	return tenant, token, nil
}

// printDemoBanner tells the person who started the demo where it runs, how to sign in, the
// API token and where the data stays.
func printDemoBanner(stdout io.Writer, url, token, dataDir string) {
	fmt.Fprintf(stdout, "Settle demo is running at %s\n\nSign in with any of these (password %q):\n", url, demoPassword)
	for _, u := range demoUsers {
		fmt.Fprintf(stdout, "  %-22s %s\n", u.email, u.role)
	}
	fmt.Fprintf(stdout, "\nAPI token for tenant %q:\n  %s\n\nThe data stays in %s. Press Ctrl-C to stop.\n", demoTenant, token, dataDir)
}

// demoHistory writes days of history into a new demo database before the
// server starts, so the pages open on a month of figures and the live traffic continues
// from now. A database that already ran keeps what it has: its rollups are past the
// history's times.
func demoHistory(ctx context.Context, cfg Config, days int, f historyFakes, logger *slog.Logger, progress *Reporter) error {
	db, err := pg.Open(ctx, cfg.DatabaseURL, append(dbOptions(cfg), pg.WithAsyncCommit())...)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	st, err := db.RollupStatus(ctx)
	if err != nil {
		return err
	}
	if st.Ran() {
		logger.Info("demo history: this database already has its own, so none is written", "counted_until", st.MinutesUntil)
		return nil
	}
	tenant, err := db.EnsureTenant(ctx, demoTenant)
	if err != nil {
		return err
	}
	// The history's LLM calls go at full speed; the live ones at a person's pace.
	f.llm.SetPace(0, 0)
	defer f.llm.SetPace(demoLLMLatency, demoLLMChunkDelay)
	started := time.Now()
	// It ends a minute ago, so the live services take over the roles it held at once.
	plan := historyPlan{Days: days, PerHour: demoHistoryPerHour, End: started.UTC().Truncate(time.Minute).Add(-time.Minute),
		Seed: uint64(started.UnixNano())}
	if err := writeHistory(ctx, db, tenant, f, plan, progress, logger); err != nil {
		return err
	}
	logger.Info("demo history written", "days", plan.Days, "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// maxHistoryDays bounds the demo's history: the rollups keep minute rows 35 days, and a
// longer history only takes longer to write.
const maxHistoryDays = 35

// parseHistoryDays reads the demo's --history: a whole number of days such as 30d, or 0.
func parseHistoryDays(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), "d"))
	if err != nil || n < 0 || n > maxHistoryDays || (n > 0 && !strings.HasSuffix(v, "d")) {
		return 0, usagef("demo: --history %q is not a number of days from 0d to %dd, such as 30d", v, maxHistoryDays)
	}
	return n, nil
}
